// Combining per-rank numbers on every rank through the communicator under
// test itself, so the benchmarks need no MPI: each rank writes its value into
// its own slot of a zeroed array, and a sum-AllReduce gives every rank the
// whole array (x + 0 + ... + 0 is exact in every type).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gyre.h"

namespace gyre_bench {

// Sum-AllReduce of a small host array on every rank (hostAllReduce in memory.h).
using HostAllReduceFn = std::function<ncclResult_t(void* data, size_t count, ncclDataType_t type)>;

// One rank's timings (us per call) for one table row.
struct RowTimes {
  double outOfPlaceUs = 0;
  double inPlaceUs = 0;
};

// Gathers every rank's times (float64 sum) into *all, indexed by rank.
ncclResult_t gatherTimes(const HostAllReduceFn& allReduce, int rank, int nranks, const RowTimes& mine,
                         std::vector<RowTimes>* all);

// Sums the wrong-element counts of all ranks in place (int64 sum).
ncclResult_t sumWrong(const HostAllReduceFn& allReduce, int64_t wrong[2]);

// -a: 0 rank 0's time, 1 the mean, 2 the minimum, 3 the maximum.
double combineTimes(const std::vector<double>& perRank, int averageMode);

struct RankIdentity {
  int pid = 0;
  std::string host;
};

// Every rank's pid and host name (uint8 sum over fixed-size slots).
ncclResult_t gatherIdentities(const HostAllReduceFn& allReduce, int rank, int nranks,
                              std::vector<RankIdentity>* all);

}  // namespace gyre_bench
