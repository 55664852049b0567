// Tuner plugins steering host-memory communicators: every interface version
// (v2..v6) loads and its answer becomes the plan (compared with gyre's own
// plan for the same call, the plugin left out), results stay exact, the
// plugin gets the communicator's facts and is finalized at destroy; channel
// counts, chunk sizes, NCCL_ALGO and per-call selections, and communicators
// made by split.
#include <catch2/catch.hpp>
#include "tuner_test_util.h"

namespace {

using namespace gyre;
using namespace gyre::test;
using namespace gyre::test::tuner;

constexpr size_t kSmall = 1024;       // 4 KiB: below the plugin's Tree threshold
constexpr size_t kLarge = 64 << 10;   // 256 KiB: above it

int initHost(ncclComm_t* comm, int rank, int n, const ncclUniqueId& id) {
  RANK_CHECK(gyreCommInitRankHost(comm, n, id, rank, nullptr) == ncclSuccess, "rank %d: init: %s", rank,
             lastError().c_str());
  return 0;
}

TEST_CASE("tuner plugins of every interface version from v2 to v6 steer host AllReduces as they say", "[tuner]") {
  for (int v = 2; v <= 6; ++v) {
    const std::string dir = freshFolder();
    std::string name = "V";
    name += std::to_string(v);
    RankOptions o = tunerOptions(pluginPath(name), dir,
                                 {{"GYRETEST_TUNER_TREE_ABOVE", "65536"}, {"GYRETEST_TUNER_CHUNK", "4096"}});
    RunResult result = runRanks(
        4,
        [&](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initHost(&comm, rank, n, id)) return 1;
          RANK_CHECK(comm->tuner != nullptr, "rank %d: v%d: no tuner session", rank, v);
          // Below the threshold the plugin makes Ring cheapest, above it Tree:
          // the plan runs exactly that, without gyre's own variants.
          Plan small = planOf(comm, CollKind::AllReduce, kSmall, true);
          Plan large = planOf(comm, CollKind::AllReduce, kLarge, true);
          RANK_CHECK(small.algorithm == Algorithm::Ring && !small.doubling && !small.singleCopy,
                     "rank %d: v%d: 4 KiB planned %s, the plugin said Ring", rank, v, describe(small).c_str());
          RANK_CHECK(large.algorithm == Algorithm::Tree && !large.doubling,
                     "rank %d: v%d: 256 KiB planned %s, the plugin said Tree", rank, v, describe(large).c_str());
          // v6's getChunkSize asked for 4096-byte steps; older versions have none.
          const Plan own = planOf(comm, CollKind::AllReduce, kLarge, false);
          const size_t chunk = v == 6 ? 1024 : own.chunkElems;
          RANK_CHECK(large.chunkElems == chunk, "rank %d: v%d: chunk of %zu elements, expected %zu", rank, v,
                     large.chunkElems, chunk);
          // The plugin leaves AllGather's costs alone: gyre's own algorithm and channels.
          Plan gather = planOf(comm, CollKind::AllGather, kSmall, true);
          Plan ownGather = planOf(comm, CollKind::AllGather, kSmall, false);
          RANK_CHECK(gather.algorithm == ownGather.algorithm && gather.nchannels == ownGather.nchannels &&
                         gather.singleCopy == ownGather.singleCopy,
                     "rank %d: v%d: the plugin left AllGather alone but it planned %s, not %s", rank, v,
                     describe(gather).c_str(), describe(ownGather).c_str());
          for (size_t count : {kSmall, kLarge, size_t{3}, kLarge + 5})
            if (allReduceExact(comm, rank, n, count)) return 1;
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy: %s", rank, lastError().c_str());
          const std::string calls = pluginLog(dir), debug = debugLog(dir);
          RANK_CHECK(has(calls, "init version=" + std::to_string(v) + " nranks=4 nnodes=1"),
                     "rank %d: v%d: init not called with 4 ranks on 1 host:\n%s", rank, v, calls.c_str());
          RANK_CHECK(has(calls, "getCollInfo func=4 bytes=4096 "), "rank %d: v%d: no getCollInfo for 4 KiB:\n%s",
                     rank, v, calls.c_str());
          RANK_CHECK(countOf(calls, "finalize") == 1, "rank %d: v%d: destroy/finalize not called once:\n%s", rank,
                     v, calls.c_str());
          if (v == 2) RANK_CHECK(has(calls, "v2 collNetSupport=0 nvlsSupport=0"), "rank %d: v2 support flags", rank);
          if (v >= 3)
            RANK_CHECK(has(calls, "table numAlgo=7 numProto=3 pipeOps=1"), "rank %d: v%d: table shape", rank, v);
          if (v >= 4) RANK_CHECK(has(calls, "regBuff=0"), "rank %d: v%d: regBuff", rank, v);
          if (v >= 5) {
            RANK_CHECK(has(calls, "nvlDomains=1 ranksPerDomain=4..4"), "rank %d: v%d: domains:\n%s", rank, v,
                       calls.c_str());
            RANK_CHECK(has(debug, "changed NCCL's tuning constants"), "rank %d: v%d: constants not mentioned", rank, v);
          }
          const std::string loaded = "tuner plugin gyretest-v" + std::to_string(v) + " loaded from ";
          const std::string version = "(ncclTunerPlugin_v" + std::to_string(v) + "; NCCL_TUNER_PLUGIN=";
          RANK_CHECK(has(debug, loaded) && has(debug, version),
                     "rank %d: v%d: no INFO line naming the plugin and version:\n%s", rank, v, debug.c_str());
          return 0;
        },
        o);
    INFO("v" << v << ": " << result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("a tuner plugin's channel count sets the call's channels, and one beyond the rings is ignored with an "
          "INFO line",
          "[tuner]") {
  for (const char* channels : {"1", "9"}) {
    const std::string dir = freshFolder();
    RunResult result = runRanks(
        3,
        [&](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initHost(&comm, rank, n, id)) return 1;
          const size_t count = 1 << 18;  // 1 MiB: gyre's own plan runs two ring channels on 3 host ranks
          Plan own = planOf(comm, CollKind::AllReduce, count, false);
          Plan tuned = planOf(comm, CollKind::AllReduce, count, true);
          RANK_CHECK(own.nchannels == 2, "rank %d: gyre's own plan has %d channels", rank, own.nchannels);
          const int expected = channels[0] == '1' ? 1 : own.nchannels;
          RANK_CHECK(tuned.nchannels == expected && tuned.algorithm == own.algorithm,
                     "rank %d: plugin said %s channels: planned %s (own %s)", rank, channels,
                     describe(tuned).c_str(), describe(own).c_str());
          if (allReduceExact(comm, rank, n, count) || allReduceExact(comm, rank, n, 777)) return 1;
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
          if (expected != 1)
            RANK_CHECK(has(debugLog(dir), "asks for 9 channels for AllReduce; this communicator has 1..2: ignored"),
                       "rank %d: no INFO line for 9 channels:\n%s", rank, debugLog(dir).c_str());
          return 0;
        },
        tunerOptions(pluginPath("CHANNELS"), dir, {{"GYRETEST_TUNER_CHANNELS", channels}}));
    INFO(channels << " channels: " << result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("NCCL_ALGO and a per-call algSelection keep their precedence over a tuner plugin", "[tuner]") {
  const std::string dir = freshFolder();
  RunResult result = runRanks(
      4,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHost(&comm, rank, n, id)) return 1;
        // NCCL_ALGO leaves Tree out of the table: the plugin cannot bring it back.
        Plan large = planOf(comm, CollKind::AllReduce, kLarge, true);
        Plan own = planOf(comm, CollKind::AllReduce, kLarge, false);
        RANK_CHECK(large.algorithm != Algorithm::Tree && samePlan(large, own),
                   "rank %d: NCCL_ALGO=Ring,Direct planned %s, gyre's own is %s", rank, describe(large).c_str(),
                   describe(own).c_str());
        // A per-call selection has the last word over the plugin's Ring below the threshold.
        Plan direct = planOf(comm, CollKind::AllReduce, kSmall, true, {1u << int(Algorithm::Direct), true});
        RANK_CHECK(direct.algorithm == Algorithm::Direct, "rank %d: algSelection=Direct planned %s", rank,
                   describe(direct).c_str());
        ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
        config.algSelection = "Direct";
        config.forceAlgSelection = 1;
        std::vector<int32_t> data(kSmall, rank + 1);
        RANK_CHECK(ncclAllReduceConfig(data.data(), data.data(), kSmall, ncclInt32, ncclSum, comm, nullptr,
                                       &config) == ncclSuccess,
                   "rank %d: AllReduce with algSelection: %s", rank, lastError().c_str());
        RANK_CHECK(data[0] == n * (n + 1) / 2 && data[kSmall - 1] == n * (n + 1) / 2, "rank %d: sum %d", rank, data[0]);
        if (allReduceExact(comm, rank, n, kLarge)) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
        RANK_CHECK(has(debugLog(dir), "makes TREE/SIMPLE cheapest for AllReduce of 262144 bytes, which gyre cannot "
                                      "run here (NCCL_ALGO / NCCL_PROTO exclude it): skipped"),
                   "rank %d: no INFO line for the excluded Tree:\n%s", rank, debugLog(dir).c_str());
        return 0;
      },
      tunerOptions(pluginPath("V6"), dir, {{"NCCL_ALGO", "Ring,Direct"}, {"GYRETEST_TUNER_TREE_ABOVE", "65536"}}));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("communicators made by ncclCommSplit open their own tuner session and destroy and abort close each",
          "[tuner]") {
  const std::string dir = freshFolder();
  RunResult result = runRanks(
      4,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr, half = nullptr;
        if (initHost(&comm, rank, n, id)) return 1;
        RANK_CHECK(ncclCommSplit(comm, rank % 2, rank, &half, nullptr) == ncclSuccess, "rank %d: split: %s", rank,
                   lastError().c_str());
        RANK_CHECK(half->tuner != nullptr && half->tuner != comm->tuner, "rank %d: the split has no session of its own",
                   rank);
        if (allReduceExact(half, rank / 2, 2, kLarge)) return 1;
        RANK_CHECK(ncclCommAbort(half) == ncclSuccess, "rank %d: abort", rank);
        if (allReduceExact(comm, rank, n, kSmall)) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
        const std::string calls = pluginLog(dir);
        RANK_CHECK(has(calls, "nranks=4 nnodes=1") && has(calls, "nranks=2 nnodes=1") &&
                       countOf(calls, "finalize") == 2,
                   "rank %d: expected two inits (4 and 2 ranks) and two finalizes:\n%s", rank, calls.c_str());
        return 0;
      },
      tunerOptions(pluginPath("V5"), dir));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("without a tuner library, the net plugin's library is used when it exports a tuner, as in NCCL",
          "[tuner]") {
  const std::string dir = freshFolder();
  RankOptions o = tunerOptions("", dir, {{"NCCL_NET_PLUGIN", pluginPath("NET")}});
  o.env[0].second = std::nullopt;  // NCCL_TUNER_PLUGIN unset: libnccl-tuner.so, then the net plugin's library
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHost(&comm, rank, n, id)) return 1;
        RANK_CHECK(comm->tuner != nullptr && comm->tuner->library().file == pluginPath("NET"),
                   "rank %d: the net plugin's tuner was not loaded", rank);
        Plan large = planOf(comm, CollKind::AllReduce, kLarge, true);
        RANK_CHECK(large.algorithm == Algorithm::Tree, "rank %d: planned %s, the plugin said Tree", rank,
                   describe(large).c_str());
        if (allReduceExact(comm, rank, n, kLarge)) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
        RANK_CHECK(!has(debugLog(dir), " WARN ") && has(debugLog(dir), "the net plugin's library"),
                   "rank %d: log:\n%s", rank, debugLog(dir).c_str());
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("gyre-info --tuner shows gyre's picks beside the tuner plugin's", "[tuner]") {
  const char* info = getenv("TUNER_GYRE_INFO");
  const char* topologies = getenv("TUNER_TOPOLOGIES");
  REQUIRE(info);
  REQUIRE(topologies);
  const std::string cmd = std::string(info) + " --topo " + topologies + "/ci_vm.xml --ranks 4 --tuner " +
                          pluginPath("V6") + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  INFO(out);
  CHECK(status == 0);
  // The plugin's rule (default: Tree from 64 KiB): each AllReduce row's
  // plugin pick, the first cell after the size.
  std::istringstream lines(out.substr(out.find("Planner picks with tuner plugin gyretest-v6")));
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string size, unit, own, arrow, tuned;
    if (!(words >> size >> unit >> own >> arrow >> tuned) || arrow != "->") continue;
    const size_t bytes = std::stoull(size) << (unit == "B" ? 0 : unit == "KiB" ? 10 : unit == "MiB" ? 20 : 30);
    CHECK(tuned == (bytes >= 65536 ? "Tree/Simple" : "Ring/Simple"));
    ++rows;
  }
  CHECK(rows == 10);
}

}  // namespace
