/* Shared by the two installed-library programs: fork `nranks` ranks, run
 * `body` in each, wait for all (bounded by the test's `timeout`), and report
 * which file the library was loaded from, so the test can check that it was
 * the installed one and not another libnccl.so.2 on the system. */
#ifndef GYRE_TESTS_INSTALL_RANKS_H_
#define GYRE_TESTS_INSTALL_RANKS_H_


#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int forkRanks(int nranks, int (*body)(int rank, int nranks, ncclUniqueId id)) {
  Dl_info info;
  if (dladdr((void*)&ncclGetVersion, &info) && info.dli_fname) printf("library: %s\n", info.dli_fname);
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  fflush(stdout);
  pid_t pids[8];
  for (int r = 0; r < nranks; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(body(r, nranks, id));
  }
  int bad = 0;
  for (int r = 0; r < nranks; ++r) {
    int status = 0;
    if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed\n", r);
      bad = 1;
    }
  }
  printf(bad ? "FAILED\n" : "PASSED\n");
  return bad;
}

#endif
