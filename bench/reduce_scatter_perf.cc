// reduce_scatter_perf: nccl-tests' ReduceScatter benchmark on gyre host
// communicators.
//   reduce_scatter_perf -p 4 -b 8 -e 64M -f 4 -c 1 -o max
// The size is the whole send buffer; each rank receives size/nranks of it.
#include "common/collective.h"

namespace {

using gyre_bench::CheckPattern;
using gyre_bench::CollCounts;

CollCounts reduceScatterCounts(size_t count, size_t, int nranks, int rank) {
  CollCounts c;
  c.recvCount = c.paramCount = count / nranks;
  c.sendCount = c.recvCount * nranks;
  c.inplaceRecvOffset = c.recvCount * rank;  // in place: this rank's block of the input
  return c;
}

// Each rank sends the (n-1)/n of its input that other ranks reduce.
double reduceScatterBusBw(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

ncclResult_t reduceScatterRun(const void* send, void* recv, const CollCounts& c,
                              ncclDataType_t type, ncclRedOp_t op, int, ncclComm_t comm,
    cudaStream_t stream) {
  return ncclReduceScatter(send, recv, c.paramCount, type, op, comm, stream);
}

// Rank r receives the reduction of block r of every rank's input.
int64_t reduceScatterExpected(const CheckPattern& p, const CollCounts& c, size_t i, int rank,
                              int, int) {
  return p.reduced(static_cast<size_t>(rank) * c.recvCount + i);
}

size_t reduceScatterChecked(const CollCounts& c, int, int) { return c.recvCount; }

constexpr gyre_bench::Collective kReduceScatter = {
    "reduce_scatter_perf", "ReduceScatter", /*usesOp=*/true, /*usesRoot=*/false,
    reduceScatterCounts,   reduceScatterBusBw, reduceScatterRun, reduceScatterExpected,
    reduceScatterChecked};

}  // namespace

int main(int argc, char** argv) { return gyre_bench::benchMain(argc, argv, kReduceScatter); }
