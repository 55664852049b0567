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

/* The ranks are forked first and the parent then makes the id and writes it
 * to each rank's pipe: ncclGetUniqueId starts a thread, and a process must
 * not fork while it has live threads. A rank whose pipe ends early exits. */
static int forkRanks(int nranks, int (*body)(int rank, int nranks, ncclUniqueId id)) {
  Dl_info info;
  if (dladdr((void*)&ncclGetVersion, &info) && info.dli_fname) printf("library: %s\n", info.dli_fname);
  fflush(stdout);
  pid_t pids[8];
  int idPipes[8];
  for (int r = 0; r < nranks; ++r) {
    int p[2];
    if (pipe(p) != 0) return 1;
    pids[r] = fork();
    if (pids[r] == 0) {
      ncclUniqueId id;
      size_t got = 0;
      close(p[1]);
      for (int q = 0; q < r; ++q) close(idPipes[q]);
      while (got < sizeof id) {
        ssize_t n = read(p[0], (char*)&id + got, sizeof id - got);
        if (n <= 0) _exit(2);
        got += (size_t)n;
      }
      _exit(body(r, nranks, id));
    }
    close(p[0]);
    idPipes[r] = p[1];
  }
  ncclUniqueId id;
  int made = ncclGetUniqueId(&id) == ncclSuccess;
  if (!made) fprintf(stderr, "ncclGetUniqueId: %s\n", ncclGetLastError(NULL));
  for (int r = 0; r < nranks; ++r) {
    if (made && write(idPipes[r], &id, sizeof id) != (ssize_t)sizeof id) fprintf(stderr, "rank %d: id not sent\n", r);
    close(idPipes[r]);
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
