/* NCCL_DEBUG=VERSION prints a banner that tells which library a process
 * loaded (gyre, its release, the NCCL API level, the file), and
 * ncclResetDebugInit makes a program's later change of NCCL_DEBUG* count.
 * Built against gyre's nccl.h, linked with libnccl.so.2; run with NCCL_DEBUG
 * unset. usage: debug_banner SCRATCH_DIR */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int oneRankComm(void) {
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || gyreCommInitRankHost(&comm, 1, id, 0, NULL) != ncclSuccess) {
    fprintf(stderr, "FAIL: one-rank host communicator: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  return ncclCommDestroy(comm) != ncclSuccess;
}

static long fileSize(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

int main(int argc, char** argv) {
  if (argc != 2 || getenv("NCCL_DEBUG")) {
    fprintf(stderr, "usage: NCCL_DEBUG unset; %s SCRATCH_DIR\n", argv[0]);
    return 2;
  }
  char log[4096];
  snprintf(log, sizeof(log), "%s/debug_banner.%d.log", argv[1], (int)getpid());
  unlink(log);
  setenv("NCCL_DEBUG_FILE", log, 1);
  /* Logging is off; setting NCCL_DEBUG now changes nothing until the reset. */
  if (oneRankComm()) return 1;
  setenv("NCCL_DEBUG", "VERSION", 1);
  if (oneRankComm()) return 1;
  if (fileSize(log) > 0) {
    fprintf(stderr, "FAIL: something was logged before ncclResetDebugInit\n");
    return 1;
  }
  ncclResetDebugInit();
  if (oneRankComm()) return 1;
  /* Unset again and reset: logging stops. */
  long logged = fileSize(log);
  unsetenv("NCCL_DEBUG");
  ncclResetDebugInit();
  setenv("NCCL_DEBUG_SUBSYS", "ALL", 1);
  if (oneRankComm()) return 1;
  if (fileSize(log) != logged) {
    fprintf(stderr, "FAIL: lines were logged after NCCL_DEBUG was unset and ncclResetDebugInit called\n");
    return 1;
  }

  char text[4096] = {0};
  FILE* f = fopen(log, "r");
  if (!f) {
    fprintf(stderr, "FAIL: no log file %s after ncclResetDebugInit with NCCL_DEBUG=VERSION\n", log);
    return 1;
  }
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  text[n] = '\0';
  fclose(f);
  unlink(log);
  char want[128];
  snprintf(want, sizeof(want), "gyre %d.%d.%d (NCCL API %d.%d.%d) loaded from ", GYRE_MAJOR, GYRE_MINOR, GYRE_PATCH,
           NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  const char* banner = strstr(text, want);
  if (!banner || !strstr(banner, "libnccl.so.2")) {
    fprintf(stderr, "FAIL: the log does not hold '%s.../libnccl.so.2':\n%s\n", want, text);
    return 1;
  }
  printf("%sPASSED\n", text);
  return 0;
}
