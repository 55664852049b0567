// Tuner plugins that misbehave never break a call: a library that is
// missing, exports no tuner or an unknown version, or whose init fails is one
// WARN line naming it and why, and the communicator plans as without it;
// costs that are not times, entries gyre cannot run, channel counts out of
// range and a failing getCollInfo leave gyre's own plan, each with an INFO
// line; a slow getCollInfo only makes calls slower. Results stay exact.
#include <catch2/catch.hpp>
#include "tuner_test_util.h"

namespace {

using namespace gyre;
using namespace gyre::test;
using namespace gyre::test::tuner;

int initHost(ncclComm_t* comm, int rank, int n, const ncclUniqueId& id) {
  RANK_CHECK(gyreCommInitRankHost(comm, n, id, rank, nullptr) == ncclSuccess, "rank %d: init: %s", rank,
             lastError().c_str());
  return 0;
}

// Whether some WARN line of `debug` contains every one of `parts`.
bool warned(const std::string& debug, const std::vector<std::string>& parts) {
  std::istringstream lines(debug);
  for (std::string line; std::getline(lines, line);) {
    if (!has(line, " WARN ")) continue;
    bool all = true;
    for (const std::string& p : parts) all = all && has(line, p);
    if (all) return true;
  }
  return false;
}

TEST_CASE("a tuner library that is missing, exports no tuner, an unknown version or fails init is one WARN line and "
          "calls run without it",
          "[tuner]") {
  struct Case {
    std::string spec;
    std::vector<std::string> warning;  // parts of the one WARN line
    std::string pluginSaid = "";       // a line the plugin logged through gyre's logger
  };
  const std::vector<Case> cases = {
      {"/nonexistent/libnccl-tuner-gone.so",
       {"NCCL_TUNER_PLUGIN=/nonexistent/libnccl-tuner-gone.so", "could not be loaded"}},
      {"gyretest-absent", {"NCCL_TUNER_PLUGIN=gyretest-absent", "libnccl-tuner-gyretest-absent.so"}},
      {pluginPath("NOSYMBOL"), {pluginPath("NOSYMBOL"), "exports no ncclTunerPlugin_vN symbol"}},
      {pluginPath("V7"),
       {pluginPath("V7"), "exports ncclTunerPlugin_v7, a tuner interface version gyre does not drive"}},
      {pluginPath("FAILINIT"), {"tuner plugin gyretest-v5", "init for rank", "returned 3", "plans without it"},
       "gyretest tuner: failing init on purpose"},
      {"none", {}},
  };
  for (const Case& c : cases) {
    const std::string dir = freshFolder();
    RunResult result = runRanks(
        2,
        [&](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initHost(&comm, rank, n, id)) return 1;
          RANK_CHECK(comm->tuner == nullptr, "rank %d: %s: a tuner session exists", rank, c.spec.c_str());
          if (allReduceExact(comm, rank, n, 4096) || allReduceExact(comm, rank, n, 1 << 17)) return 1;
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
          const std::string debug = debugLog(dir);
          if (c.warning.empty())
            RANK_CHECK(!has(debug, " WARN ") && has(debug, "NCCL_TUNER_PLUGIN=none"), "rank %d: none:\n%s", rank,
                       debug.c_str());
          else
            RANK_CHECK(warned(debug, c.warning) && countOf(debug, " WARN ") == 1 && has(debug, c.pluginSaid),
                       "rank %d: %s: expected one WARN line naming it and why:\n%s", rank, c.spec.c_str(),
                       debug.c_str());
          return 0;
        },
        tunerOptions(c.spec, dir));
    INFO(c.spec << ": " << result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("garbage costs and channels from a tuner plugin leave gyre's own plan with INFO lines, and results exact",
          "[tuner]") {
  const std::string dir = freshFolder();
  RunResult result = runRanks(
      4,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHost(&comm, rank, n, id)) return 1;
        // NaN, infinite and negative costs are ignored per entry, NVLS (made
        // cheapest) is skipped, 1000 channels are ignored, a failed
        // getCollInfo (Broadcast) falls back: every plan is gyre's own.
        for (CollKind coll : {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce, CollKind::AllGather,
                              CollKind::ReduceScatter})
          for (size_t count : {size_t{64}, size_t{1024}, size_t{64} << 10, size_t{1} << 20}) {
            Plan tuned = planOf(comm, coll, count, true), own = planOf(comm, coll, count, false);
            RANK_CHECK(samePlan(tuned, own), "rank %d: %s of %zu: planned %s, gyre's own is %s", rank, collName(coll),
                       count, describe(tuned).c_str(), describe(own).c_str());
          }
        if (allReduceExact(comm, rank, n, 1024) || allReduceExact(comm, rank, n, 1 << 18)) return 1;
        std::vector<int32_t> b(1000, rank == 2 ? 42 : 0);
        RANK_CHECK(ncclBroadcast(b.data(), b.data(), b.size(), ncclInt32, 2, comm, nullptr) == ncclSuccess &&
                       b[0] == 42 && b[999] == 42,
                   "rank %d: broadcast: %s", rank, lastError().c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
        const std::string debug = debugLog(dir);
        for (const char* line : {"set RING/SIMPLE for AllReduce to nan, which is not a time",
                                 "set TREE/SIMPLE for AllReduce to -5", "set RING/LL for AllReduce to inf",
                                 "makes NVLS/SIMPLE cheapest for AllReduce", "asks for 1000 channels",
                                 "getCollInfo returned 3"})
          RANK_CHECK(countOf(debug, line) == 1, "rank %d: expected one INFO line with \"%s\":\n%s", rank, line,
                     debug.c_str());
        RANK_CHECK(has(debug, "(gyre has no such algorithm or protocol): skipped") && !has(debug, " WARN "),
                   "rank %d: no reason for NVLS, or a WARN line:\n%s", rank, debug.c_str());
        return 0;
      },
      tunerOptions(pluginPath("GARBAGE"), dir));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("an entry a tuner plugin makes cheapest that host memory cannot run is skipped with one INFO line naming it",
          "[tuner]") {
  const std::string dir = freshFolder();
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHost(&comm, rank, n, id)) return 1;
        for (size_t count : {size_t{16}, size_t{1} << 18}) {
          Plan tuned = planOf(comm, CollKind::AllReduce, count, true);
          Plan own = planOf(comm, CollKind::AllReduce, count, false);
          RANK_CHECK(samePlan(tuned, own) && tuned.protocol == Protocol::Simple, "rank %d: planned %s, own %s", rank,
                     describe(tuned).c_str(), describe(own).c_str());
          if (allReduceExact(comm, rank, n, count)) return 1;
        }
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
        const std::string debug = debugLog(dir);
        RANK_CHECK(countOf(debug, "makes RING/LL cheapest for AllReduce") == 1 &&
                       has(debug, "host memory runs Simple only): skipped"),
                   "rank %d: expected one INFO line naming RING/LL:\n%s", rank, debug.c_str());
        return 0;
      },
      tunerOptions(pluginPath("RINGLL"), dir));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a slow getCollInfo makes calls slower but never breaks one", "[tuner]") {
  const std::string dir = freshFolder();
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHost(&comm, rank, n, id)) return 1;
        // Rank 1's plugin sleeps longer, so rank 0 waits for its peer each call.
        setenv("GYRETEST_TUNER_SLEEP_MS", rank == 1 ? "400" : "50", 1);
        for (int i = 0; i < 3; ++i)
          if (allReduceExact(comm, rank, n, 5000)) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
        const std::string calls = pluginLog(dir);
        RANK_CHECK(countOf(calls, "getCollInfo func=4 bytes=20000 ") == 3,
                   "rank %d: the plugin was not asked once per call:\n%s", rank, calls.c_str());
        return 0;
      },
      tunerOptions(pluginPath("SLOW"), dir));
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace
