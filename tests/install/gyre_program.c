/* Built with `pkg-config --cflags --libs gyre` against an installed gyre:
 * host-memory communicators (gyreCommInitRankHost) over two forked ranks, an
 * AllReduce and a Broadcast checked against exact results. */
#define _GNU_SOURCE /* dladdr, in ranks.h */
#include <gyre.h>
#include <stdio.h>

#include "ranks.h"

#define N 777

static int body(int rank, int nranks, ncclUniqueId id) {
  ncclComm_t comm;
  int isHost = 0;
  if (gyreCommInitRankHost(&comm, nranks, id, rank, NULL) != ncclSuccess ||
      gyreCommIsHost(comm, &isHost) != ncclSuccess || !isHost) {
    fprintf(stderr, "rank %d: gyreCommInitRankHost: %s\n", rank, ncclGetLastError(NULL));
    return 1;
  }
  static double in[N], sum[N], root[N];
  for (int i = 0; i < N; ++i) {
    in[i] = (rank + 1) * 0.5 * i;
    root[i] = rank == 1 ? i + 0.25 : -1;
  }
  if (ncclAllReduce(in, sum, N, ncclFloat64, ncclSum, comm, NULL) != ncclSuccess ||
      ncclBroadcast(root, root, N, ncclFloat64, 1, comm, NULL) != ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", rank, ncclGetLastError(comm));
    return 1;
  }
  ncclCommDestroy(comm);
  for (int i = 0; i < N; ++i) {
    if (sum[i] != 1.5 * i || root[i] != i + 0.25) {
      fprintf(stderr, "rank %d: element %d: sum %g root %g\n", rank, i, sum[i], root[i]);
      return 1;
    }
  }
  return 0;
}

int main(void) { return forkRanks(2, body); }
