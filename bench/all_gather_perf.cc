// all_gather_perf: nccl-tests' AllGather benchmark on gyre host communicators.
//   all_gather_perf -p 4 -b 8 -e 64M -f 4 -c 1
// The size is the whole receive buffer; each rank contributes size/nranks.
#include "common/collective.h"

namespace {

using gyre_bench::CheckPattern;
using gyre_bench::CollCounts;

CollCounts allGatherCounts(size_t count, size_t, int nranks, int rank) {
  CollCounts c;
  c.sendCount = c.paramCount = count / nranks;
  c.recvCount = c.sendCount * nranks;
  c.inplaceSendOffset = c.sendCount * rank;  // in place: this rank's block of the output
  return c;
}

// Each rank receives the (n-1)/n of the output that other ranks hold.
double allGatherBusBw(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

ncclResult_t allGatherRun(const void* send, void* recv, const CollCounts& c,
                          ncclDataType_t type, ncclRedOp_t, int, ncclComm_t comm,
    cudaStream_t stream) {
  return ncclAllGather(send, recv, c.paramCount, type, comm, stream);
}

// Output block r is rank r's input.
int64_t allGatherExpected(const CheckPattern& p, const CollCounts& c, size_t i, int, int, int) {
  return p.input(static_cast<int>(i / c.sendCount), i % c.sendCount);
}

size_t allGatherChecked(const CollCounts& c, int, int) { return c.recvCount; }

constexpr gyre_bench::Collective kAllGather = {
    "all_gather_perf", "AllGather", /*usesOp=*/false, /*usesRoot=*/false,
    allGatherCounts,   allGatherBusBw, allGatherRun, allGatherExpected, allGatherChecked};

}  // namespace

int main(int argc, char** argv) { return gyre_bench::benchMain(argc, argv, kAllGather); }
