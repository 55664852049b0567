// reduce_perf: nccl-tests' Reduce benchmark on gyre host communicators.
//   reduce_perf -p 4 -b 8 -e 64M -f 4 -c 1 -r 2 -o min
#include "common/collective.h"

namespace {

using gyre_bench::CheckPattern;
using gyre_bench::CollCounts;

CollCounts reduceCounts(size_t count, size_t, int, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

// Every byte crosses each link of a pipelined chain towards the root once.
double reduceBusBw(int) { return 1.0; }

ncclResult_t reduceRun(const void* send, void* recv, const CollCounts& c, ncclDataType_t type,
                       ncclRedOp_t op, int root, ncclComm_t comm,
    cudaStream_t stream) {
  return ncclReduce(send, recv, c.paramCount, type, op, root, comm, stream);
}

int64_t reduceExpected(const CheckPattern& p, const CollCounts&, size_t i, int, int, int) {
  return p.reduced(i);
}

// Only the root's receive buffer is defined.
size_t reduceChecked(const CollCounts& c, int rank, int root) {
  return rank == root ? c.recvCount : 0;
}

constexpr gyre_bench::Collective kReduce = {
    "reduce_perf", "Reduce", /*usesOp=*/true, /*usesRoot=*/true,
    reduceCounts,  reduceBusBw, reduceRun, reduceExpected, reduceChecked};

}  // namespace

int main(int argc, char** argv) { return gyre_bench::benchMain(argc, argv, kReduce); }
