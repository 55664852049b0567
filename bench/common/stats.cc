#include "stats.h"

#include <cstdio>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>

namespace gyre_bench {
namespace {

// Host names longer than this are cut in the header; they are only printed.
constexpr size_t kHostSlot = 64;

struct IdentitySlot {
  int32_t pid;
  char host[kHostSlot];
};

}  // namespace

ncclResult_t gatherTimes(const HostAllReduceFn& allReduce, int rank, int nranks, const RowTimes& mine,
                         std::vector<RowTimes>* all) {
  std::vector<double> slots(2 * static_cast<size_t>(nranks), 0.0);
  slots[2 * rank] = mine.outOfPlaceUs;
  slots[2 * rank + 1] = mine.inPlaceUs;
  ncclResult_t r = allReduce(slots.data(), slots.size(), ncclFloat64);
  if (r != ncclSuccess) return r;
  // Every other rank adds zeros to this rank's slots: they come back as sent
  // unless the library's AllReduce is wrong.
  if (slots[2 * rank] != mine.outOfPlaceUs || slots[2 * rank + 1] != mine.inPlaceUs) {
    std::fprintf(stderr, "gyre bench: rank %d: the AllReduce gathering times returned %g/%g for this rank's "
                 "%g/%g\n", rank, slots[2 * rank], slots[2 * rank + 1], mine.outOfPlaceUs, mine.inPlaceUs);
    return ncclInternalError;
  }
  all->resize(nranks);
  for (int i = 0; i < nranks; ++i) (*all)[i] = {slots[2 * i], slots[2 * i + 1]};
  return ncclSuccess;
}

ncclResult_t sumWrong(const HostAllReduceFn& allReduce, int64_t wrong[2]) {
  return allReduce(wrong, 2, ncclInt64);
}

double combineTimes(const std::vector<double>& perRank, int averageMode) {
  if (perRank.empty()) return 0;
  switch (averageMode) {
    case 0: return perRank[0];
    case 2: return *std::min_element(perRank.begin(), perRank.end());
    case 3: return *std::max_element(perRank.begin(), perRank.end());
    default:
      return std::accumulate(perRank.begin(), perRank.end(), 0.0) /
             static_cast<double>(perRank.size());
  }
}

ncclResult_t gatherIdentities(const HostAllReduceFn& allReduce, int rank, int nranks,
                              std::vector<RankIdentity>* all) {
  std::vector<IdentitySlot> slots(nranks);
  std::memset(slots.data(), 0, slots.size() * sizeof(IdentitySlot));
  slots[rank].pid = static_cast<int32_t>(getpid());
  gethostname(slots[rank].host, kHostSlot - 1);
  slots[rank].host[kHostSlot - 1] = '\0';
  ncclResult_t r = allReduce(slots.data(), slots.size() * sizeof(IdentitySlot), ncclUint8);
  if (r != ncclSuccess) return r;
  all->resize(nranks);
  for (int i = 0; i < nranks; ++i) {
    slots[i].host[kHostSlot - 1] = '\0';
    (*all)[i] = {slots[i].pid, slots[i].host};
  }
  return ncclSuccess;
}

}  // namespace gyre_bench
