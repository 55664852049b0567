// alltoall_perf: nccl-tests' AlltoAll benchmark on gyre host communicators.
//   alltoall_perf -p 4 -b 8 -e 64M -f 4 -c 1
// The size is the whole send (= receive) buffer: nranks blocks, one per peer.
#include "common/collective.h"

namespace {

using gyre_bench::CheckPattern;
using gyre_bench::CollCounts;

CollCounts allToAllCounts(size_t count, size_t typeBytes, int nranks, int) {
  CollCounts c;
  // As nccl-tests: each block is rounded down to a multiple of 16 bytes.
  const size_t align = typeBytes < 16 ? 16 / typeBytes : 1;
  c.paramCount = count / nranks / align * align;
  c.sendCount = c.recvCount = c.paramCount * nranks;
  return c;
}

// Each rank sends (n-1)/n of its buffer to other ranks.
double allToAllBusBw(int nranks) { return static_cast<double>(nranks - 1) / nranks; }

ncclResult_t allToAllRun(const void* send, void* recv, const CollCounts& c,
                         ncclDataType_t type, ncclRedOp_t, int, ncclComm_t comm,
    cudaStream_t stream) {
  return ncclAlltoAll(send, recv, c.paramCount, type, comm, stream);
}

// Receive block b holds block `rank` of rank b's input.
int64_t allToAllExpected(const CheckPattern& p, const CollCounts& c, size_t i, int rank, int,
                         int) {
  const size_t block = i / c.paramCount;
  return p.input(static_cast<int>(block),
                 static_cast<size_t>(rank) * c.paramCount + i % c.paramCount);
}

size_t allToAllChecked(const CollCounts& c, int, int) { return c.recvCount; }

// nccl-tests times the in-place mode (one buffer for both sides) but does not
// check it: NCCL has no in-place AlltoAll.
constexpr gyre_bench::Collective kAllToAll = {
    "alltoall_perf", "AlltoAll",    /*usesOp=*/false, /*usesRoot=*/false,
    allToAllCounts,  allToAllBusBw, allToAllRun,      allToAllExpected,
    allToAllChecked, /*checkInPlace=*/false};

}  // namespace

int main(int argc, char** argv) { return gyre_bench::benchMain(argc, argv, kAllToAll); }
