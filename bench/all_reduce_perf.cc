// all_reduce_perf: nccl-tests' AllReduce benchmark on gyre host communicators.
//   all_reduce_perf -p 4 -b 8 -e 64M -f 4 -c 1
#include "common/collective.h"

namespace {

using gyre_bench::CheckPattern;
using gyre_bench::CollCounts;

CollCounts allReduceCounts(size_t count, size_t, int, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;  // in place: send and receive are the same elements
}

// Each rank sends and receives 2(n-1)/n of the message in a ring (nccl-tests' busbw).
double allReduceBusBw(int nranks) { return 2.0 * (nranks - 1) / nranks; }

ncclResult_t allReduceRun(const void* send, void* recv, const CollCounts& c,
                          ncclDataType_t type, ncclRedOp_t op, int /*root*/, ncclComm_t comm,
    cudaStream_t stream) {
  return ncclAllReduce(send, recv, c.paramCount, type, op, comm, stream);
}

int64_t allReduceExpected(const CheckPattern& p, const CollCounts&, size_t i, int, int, int) {
  return p.reduced(i);
}

size_t allReduceChecked(const CollCounts& c, int, int) { return c.recvCount; }

constexpr gyre_bench::Collective kAllReduce = {
    "all_reduce_perf", "AllReduce", /*usesOp=*/true, /*usesRoot=*/false,
    allReduceCounts,   allReduceBusBw, allReduceRun, allReduceExpected, allReduceChecked};

}  // namespace

int main(int argc, char** argv) { return gyre_bench::benchMain(argc, argv, kAllReduce); }
