/* Built with `pkg-config --cflags --libs nccl` against an installed gyre:
 * plain NCCL API calls (no gyre* function), two forked ranks, an AllReduce
 * and an AllGather checked against exact sums. Run with GYRE_FAKE_CUDA=1,
 * where device communicators take host memory, so no GPU is needed. */
#define _GNU_SOURCE /* dladdr, in ranks.h */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#include "ranks.h"

#define N 1000

static int body(int rank, int nranks, ncclUniqueId id) {
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclCommInitRank: %s\n", rank, ncclGetLastError(NULL));
    return 1;
  }
  static int in[N], sum[N], gathered[N * 2];
  for (int i = 0; i < N; ++i) in[i] = (rank + 1) * i;
  ncclGroupStart();
  ncclAllReduce(in, sum, N, ncclInt32, ncclSum, comm, NULL);
  ncclAllGather(in, gathered, N, ncclInt32, comm, NULL);
  r = ncclGroupEnd();
  /* ncclCommDestroy waits for the stream's work, as cudaStreamSynchronize would. */
  if (r != ncclSuccess || ncclCommDestroy(comm) != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, ncclGetLastError(NULL));
    return 1;
  }
  for (int i = 0; i < N; ++i) {
    if (sum[i] != 3 * i || gathered[i] != i || gathered[N + i] != 2 * i) {
      fprintf(stderr, "rank %d: element %d: sum %d gathered %d %d\n", rank, i, sum[i], gathered[i], gathered[N + i]);
      return 1;
    }
  }
  return 0;
}

int main(void) {
  int version = 0;
  ncclGetVersion(&version);
  printf("ncclGetVersion: %d\n", version);
  if (version != NCCL_VERSION_CODE) return 1;
  return forkRanks(2, body);
}
