/* A program written and built against NVIDIA's nccl.h and libnccl.so.2, run
 * with gyre's libgyre.so in its place (tests/abi/run_nccl_program.sh). It
 * checks the ABI where it matters: ncclUniqueId by value, ncclConfig_t from
 * NCCL_CONFIG_INITIALIZER, enum values, and the calls' behaviour.
 *
 * No GPU is needed: the test runs with GYRE_FAKE_CUDA=1, where gyre's device
 * communicators treat host memory as device memory. ncclCommDestroy waits
 * for the queued collectives, so the results are read after it. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 4096
#define RANKS 2

static int fail(int rank, const char* what, ncclResult_t r) {
  fprintf(stderr, "rank %d: %s: %s (%d)\n", rank, what, ncclGetErrorString(r), (int)r);
  return 1;
}

static int runRank(int rank, ncclUniqueId id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRankConfig(&comm, RANKS, id, rank, &config);
  if (r != ncclSuccess) return fail(rank, "ncclCommInitRankConfig", r);
  int count = 0, me = -1;
  ncclCommCount(comm, &count);
  ncclCommUserRank(comm, &me);
  if (count != RANKS || me != rank) return fail(rank, "count/rank", ncclInternalError);

  static float in[N], sum[N], gathered[N * RANKS];
  static double prod[N];
  for (int i = 0; i < N; ++i) {
    in[i] = (float)(rank + 1) * (float)(i % 100);
    prod[i] = rank + 2.0;
  }
  cudaStream_t stream = (cudaStream_t)0;
  if ((r = ncclAllReduce(in, sum, N, ncclFloat, ncclSum, comm, stream)) != ncclSuccess)
    return fail(rank, "ncclAllReduce", r);
  if ((r = ncclAllReduce(prod, prod, N, ncclDouble, ncclProd, comm, stream)) != ncclSuccess)
    return fail(rank, "ncclAllReduce prod", r);
  ncclGroupStart();
  ncclAllGather(in, gathered, N, ncclFloat32, comm, stream);
  if ((r = ncclGroupEnd()) != ncclSuccess) return fail(rank, "ncclGroupEnd", r);
  /* Bad input is refused with a message. */
  if (ncclAllReduce(in, sum, N, (ncclDataType_t)99, ncclSum, comm, stream) != ncclInvalidArgument)
    return fail(rank, "bad datatype accepted", ncclInternalError);
  if (strlen(ncclGetLastError(comm)) == 0) return fail(rank, "no error text", ncclInternalError);
  if ((r = ncclCommDestroy(comm)) != ncclSuccess) return fail(rank, "ncclCommDestroy", r);

  for (int i = 0; i < N; ++i) {
    float want = 3.0f * (float)(i % 100);
    if (sum[i] != want) {
      fprintf(stderr, "rank %d: sum[%d] = %g, expected %g\n", rank, i, sum[i], want);
      return 1;
    }
    if (prod[i] != 6.0) {
      fprintf(stderr, "rank %d: prod[%d] = %g, expected 6\n", rank, i, prod[i]);
      return 1;
    }
    for (int r2 = 0; r2 < RANKS; ++r2)
      if (gathered[r2 * N + i] != (float)(r2 + 1) * (float)(i % 100)) {
        fprintf(stderr, "rank %d: gathered[%d][%d] wrong\n", rank, r2, i);
        return 1;
      }
  }
  return 0;
}

int main(void) {
  int version = 0;
  ncclGetVersion(&version);
  printf("running on library version %d (built against NCCL %d.%d.%d)\n", version, NCCL_MAJOR, NCCL_MINOR,
         NCCL_PATCH);
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return fail(-1, "ncclGetUniqueId", r);
  pid_t pids[RANKS];
  for (int rank = 0; rank < RANKS; ++rank) {
    pids[rank] = fork();
    if (pids[rank] == 0) _exit(runRank(rank, id));
  }
  int bad = 0;
  for (int rank = 0; rank < RANKS; ++rank) {
    int status = 0;
    waitpid(pids[rank], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) bad = 1;
  }
  printf(bad ? "FAILED\n" : "PASSED: a program built against NCCL ran on gyre\n");
  return bad;
}
