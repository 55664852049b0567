// broadcast_perf: nccl-tests' Broadcast benchmark on gyre host communicators.
//   broadcast_perf -p 4 -b 8 -e 64M -f 4 -c 1 -r 1
#include "common/collective.h"

namespace {

using gyre_bench::CheckPattern;
using gyre_bench::CollCounts;

CollCounts broadcastCounts(size_t count, size_t, int, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

// Every byte crosses each link of a pipelined chain once.
double broadcastBusBw(int) { return 1.0; }

ncclResult_t broadcastRun(const void* send, void* recv, const CollCounts& c,
                          ncclDataType_t type, ncclRedOp_t, int root, ncclComm_t comm,
    cudaStream_t stream) {
  return ncclBroadcast(send, recv, c.paramCount, type, root, comm, stream);
}

// Every rank ends with the root's input (non-roots' own inputs, filled into
// the same buffer in place, must be overwritten).
int64_t broadcastExpected(const CheckPattern& p, const CollCounts&, size_t i, int, int, int root) {
  return p.input(root, i);
}

size_t broadcastChecked(const CollCounts& c, int, int) { return c.recvCount; }

constexpr gyre_bench::Collective kBroadcast = {
    "broadcast_perf", "Broadcast", /*usesOp=*/false, /*usesRoot=*/true,
    broadcastCounts,  broadcastBusBw, broadcastRun, broadcastExpected, broadcastChecked};

}  // namespace

int main(int argc, char** argv) { return gyre_bench::benchMain(argc, argv, kBroadcast); }
