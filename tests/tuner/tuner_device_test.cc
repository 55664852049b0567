// Tuner plugins steering device communicators on the fake CUDA runtime
// (GYRE_FAKE_CUDA=1): where kernels run, a plugin that makes RING/LL cheapest
// gets LL at sizes gyre would run Simple; where calls are staged through host
// memory, LL cannot run and the entry is skipped with one INFO line; Tree on
// one host of GPUs is skipped likewise. Results stay exact either way.
#include <catch2/catch.hpp>
#include "src/comm/executor_binding.h"
#include "src/device/runtime/runtime.h"
#include "tuner_test_util.h"

namespace {

using namespace gyre;
using namespace gyre::test;
using namespace gyre::test::tuner;

cudaStream_t fakeStream() { return reinterpret_cast<cudaStream_t>(uintptr_t{1}); }
void waitStream(cudaStream_t s) { deviceRuntime()->streamSynchronize(s); }

RankOptions deviceOptions(const std::string& plugin, const std::string& dir, const char* path) {
  return tunerOptions(plugin, dir,
                      {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_DEVICE_PATH", path}, {"GYRE_INIT_TIMEOUT", "20"},
                       {"GYRETEST_TUNER_TREE_ABOVE", "0"}});
}

int initDevice(ncclComm_t* comm, int rank, int n, const ncclUniqueId& id) {
  RANK_CHECK(ncclCommInitRank(comm, n, id, rank) == ncclSuccess, "rank %d: init on the fake device: %s", rank,
             lastError().c_str());
  RANK_CHECK((*comm)->tuner != nullptr, "rank %d: no tuner session on a device communicator", rank);
  return 0;
}

TEST_CASE("a tuner plugin steers device communicators' protocol where kernels run LL, and is skipped where they "
          "cannot", "[tuner][device]") {
  for (const char* path : {"kernels", "staged"}) {
    const std::string dir = freshFolder();
    const bool kernels = path[0] == 'k';
    RunResult result = runRanks(
        2,
        [&](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initDevice(&comm, rank, n, id)) return 1;
          RANK_CHECK(runsKernels(comm) == kernels, "rank %d: GYRE_DEVICE_PATH=%s not in use", rank, path);
          const size_t count = 1 << 18;  // 1 MiB: gyre's own choice is Simple
          Plan own = planOf(comm, CollKind::AllReduce, count, false);
          Plan tuned = planOf(comm, CollKind::AllReduce, count, true);
          RANK_CHECK(own.protocol == Protocol::Simple, "rank %d: gyre's own plan for 1 MiB is %s", rank,
                     describe(own).c_str());
          if (kernels)
            RANK_CHECK(tuned.protocol == Protocol::LL && tuned.algorithm == Algorithm::Ring,
                       "rank %d: the plugin said RING/LL, planned %s", rank, describe(tuned).c_str());
          else
            RANK_CHECK(samePlan(tuned, own), "rank %d: staged: planned %s, own %s", rank, describe(tuned).c_str(),
                       describe(own).c_str());
          for (size_t c : {count, size_t{5}, size_t{3000}})
            if (allReduceExact(comm, rank, n, c, fakeStream(), waitStream)) return 1;
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy: %s", rank, lastError().c_str());
          const std::string debug = debugLog(dir);
          RANK_CHECK(countOf(pluginLog(dir), "finalize") == 1, "rank %d: finalize not called once", rank);
          if (!kernels)
            RANK_CHECK(countOf(debug, "makes RING/LL cheapest for AllReduce") == 1,
                       "rank %d: staged: expected one INFO line naming RING/LL:\n%s", rank, debug.c_str());
          return 0;
        },
        deviceOptions(pluginPath("RINGLL"), dir, path));
    INFO(path << ": " << result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("Tree made cheapest on one host of GPUs is skipped with one INFO line and the ring runs", "[tuner][device]") {
  const std::string dir = freshFolder();
  RunResult result = runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDevice(&comm, rank, n, id)) return 1;
        Plan tuned = planOf(comm, CollKind::AllReduce, 1 << 16, true);
        RANK_CHECK(tuned.algorithm == Algorithm::Ring, "rank %d: planned %s", rank, describe(tuned).c_str());
        if (allReduceExact(comm, rank, n, 1 << 16, fakeStream(), waitStream)) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "rank %d: destroy", rank);
        const std::string debug = debugLog(dir);
        RANK_CHECK(has(debug, "makes TREE/SIMPLE cheapest for AllReduce") && has(debug, "one host"),
                   "rank %d: expected an INFO line naming TREE/SIMPLE:\n%s", rank, debug.c_str());
        return 0;
      },
      deviceOptions(pluginPath("V4"), dir, "kernels"));
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace
