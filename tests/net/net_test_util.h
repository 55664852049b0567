// Shared by the network tests: every collective on a host communicator,
// checked element by element against exact integer references computed here
// from each rank's inputs (never from gyre's own output).
#pragma once

#include <catch2/catch.hpp>
#include <dirent.h>

#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../support/fork_ranks.h"

namespace gyre::nettest {

using namespace gyre::test;

// Small values, so every sum is exact in int32.
inline int32_t inputOf(int rank, size_t i) { return int32_t((i * 2654435761u + size_t(rank) * 97) % 1000); }

inline std::vector<int32_t> inputFor(int rank, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = inputOf(rank, i);
  return v;
}

// AllReduce, AllGather, Broadcast, Reduce, ReduceScatter and a Send/Recv ring
// shift at `count` int32; false after reporting the first difference.
inline bool checkEveryCollective(ncclComm_t comm, int rank, int n, size_t count) {
  auto report = [&](const char* coll, size_t i, int64_t got, int64_t want) {
    rankFail("rank %d: %s of %zu int32 over %d ranks: element %zu is %lld, expected %lld", rank, coll, count, n, i,
             (long long)got, (long long)want);
    return false;
  };
  auto call = [&](const char* coll, ncclResult_t r) {
    if (r != ncclSuccess)
      rankFail("rank %d: %s of %zu int32 returned %d: %s", rank, coll, count, int(r), lastError().c_str());
    return r == ncclSuccess;
  };
  auto sumAt = [&](size_t i) {
    int64_t s = 0;
    for (int r = 0; r < n; ++r) s += inputOf(r, i);
    return s;
  };
  const std::vector<int32_t> mine = inputFor(rank, count);

  std::vector<int32_t> out(count, -1);
  if (!call("AllReduce", ncclAllReduce(mine.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr)))
    return false;
  for (size_t i = 0; i < count; ++i)
    if (out[i] != sumAt(i)) return report("AllReduce", i, out[i], sumAt(i));

  std::vector<int32_t> gathered(count * size_t(n), -1);
  if (!call("AllGather", ncclAllGather(mine.data(), gathered.data(), count, ncclInt32, comm, nullptr)))
    return false;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      if (gathered[size_t(r) * count + i] != inputOf(r, i))
        return report("AllGather", size_t(r) * count + i, gathered[size_t(r) * count + i], inputOf(r, i));

  const int root = n - 1;
  std::vector<int32_t> bcast = rank == root ? mine : std::vector<int32_t>(count, -1);
  if (!call("Broadcast", ncclBroadcast(bcast.data(), bcast.data(), count, ncclInt32, root, comm, nullptr)))
    return false;
  for (size_t i = 0; i < count; ++i)
    if (bcast[i] != inputOf(root, i)) return report("Broadcast", i, bcast[i], inputOf(root, i));

  std::vector<int32_t> reduced(count, -1);
  if (!call("Reduce", ncclReduce(mine.data(), reduced.data(), count, ncclInt32, ncclSum, 0, comm, nullptr)))
    return false;
  if (rank == 0)
    for (size_t i = 0; i < count; ++i)
      if (reduced[i] != sumAt(i)) return report("Reduce", i, reduced[i], sumAt(i));

  const std::vector<int32_t> full = inputFor(rank, count * size_t(n));
  std::vector<int32_t> part(count, -1);
  if (!call("ReduceScatter", ncclReduceScatter(full.data(), part.data(), count, ncclInt32, ncclSum, comm, nullptr)))
    return false;
  for (size_t i = 0; i < count; ++i) {
    const int64_t want = sumAt(size_t(rank) * count + i);
    if (part[i] != want) return report("ReduceScatter", i, part[i], want);
  }

  // Each rank sends its input to the next rank and receives the previous one's.
  std::vector<int32_t> got(count, -1);
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  if (!call("GroupStart", ncclGroupStart())) return false;
  ncclSend(mine.data(), count, ncclInt32, next, comm, nullptr);
  ncclRecv(got.data(), count, ncclInt32, prev, comm, nullptr);
  if (!call("Send/Recv", ncclGroupEnd())) return false;
  for (size_t i = 0; i < count; ++i)
    if (got[i] != inputOf(prev, i)) return report("Send/Recv", i, got[i], inputOf(prev, i));
  return true;
}

inline std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The paths of the files in `dir` (log files of the ranks).
inline std::vector<std::string> filesIn(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
    closedir(d);
  }
  return out;
}

// Counts of 0, 1, primes, one step and more (steps of NCCL_BUFFSIZE/8 bytes).
inline const std::vector<size_t>& netCounts() {
  static const std::vector<size_t> counts = {0, 1, 2, 7, 131, 8191, 65537, 200003};
  return counts;
}

// Runs init on 2 host ranks with shared memory off and `env`; returns the
// first rank's error text ("" if init succeeded).
inline std::string initError(const std::vector<std::pair<std::string, std::optional<std::string>>>& env) {
  RankOptions options;
  options.timeout_s = 30;
  options.env = env;
  options.env.push_back({"NCCL_SHM_DISABLE", "1"});
  options.env.push_back({"GYRE_INIT_TIMEOUT", "10"});
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        rankRecord("error", r == ncclSuccess ? "" : lastError());
        if (r == ncclSuccess) ncclCommDestroy(comm);
        return 0;
      },
      options);
  INFO(result.describe());
  REQUIRE(result.allOk());
  return result.ranks[0].records["error"];
}

}  // namespace gyre::nettest
