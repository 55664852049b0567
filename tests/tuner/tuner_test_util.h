// Shared by the tuner plugin tests: which test plugin to load (meson passes
// their paths as TUNER_LIB_<NAME>), the ranks' environment (INFO log and the
// plugin's call log in a fresh folder), gyre's plan with and without the
// plugin, and an AllReduce checked against exact integer sums.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/comm/comm_topology.h"
#include "src/plan/planner.h"
#include "tests/support/fork_ranks.h"

namespace gyre::test::tuner {

inline std::string pluginPath(const std::string& name) {
  const char* p = getenv(("TUNER_LIB_" + name).c_str());
  return p ? p : "";
}

// The folders freshFolder made, removed when the test process that made
// them exits (forked ranks leave with _exit and remove nothing);
// GYRE_KEEP_TEST_LOGS=1 keeps them for a look after a failure.
class FreshFolders {
 public:
  void add(const std::string& dir) { dirs_.push_back(dir); }
  ~FreshFolders() {
    const char* keep = getenv("GYRE_KEEP_TEST_LOGS");
    if (getpid() != owner_ || (keep && *keep == '1')) return;
    for (const std::string& d : dirs_) (void)system(("rm -rf '" + d + "'").c_str());
  }

 private:
  const pid_t owner_ = getpid();
  std::vector<std::string> dirs_;
};

// A folder for one run's logs (NCCL_DEBUG_FILE and the plugin's call log).
inline std::string freshFolder() {
  static FreshFolders made;
  char dir[] = "/tmp/gyre-tuner-test-XXXXXX";
  if (!mkdtemp(dir)) return "/tmp";
  made.add(dir);
  return dir;
}

inline RankOptions tunerOptions(const std::string& tuner, const std::string& dir,
                                std::vector<std::pair<std::string, std::optional<std::string>>> extra = {}) {
  RankOptions o;
  o.timeout_s = 60;
  // Each rank is the first in its process to call gyre, so its log file is its own (debug.<pid>).
  o.idMode = IdMode::kEnvCommId;
  o.env = {{"NCCL_TUNER_PLUGIN", tuner},
           {"NCCL_DEBUG", "INFO"},
           {"NCCL_DEBUG_SUBSYS", "INIT,TUNING"},
           {"NCCL_DEBUG_FILE", dir + "/debug.%p"},
           {"GYRETEST_TUNER_LOG", dir + "/plugin"},
           {"GYRE_TIMEOUT", "20"}};
  for (auto& e : extra) o.env.push_back(e);
  return o;
}

inline std::string readText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// This rank's debug log and the plugin's log of its calls.
inline std::string debugLog(const std::string& dir) { return readText(dir + "/debug." + std::to_string(getpid())); }
inline std::string pluginLog(const std::string& dir) { return readText(dir + "/plugin." + std::to_string(getpid())); }

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline size_t countOf(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The plan of a 4-byte-element call, with the communicator's tuner or (false) without it.
inline Plan planOf(ncclComm_t comm, CollKind coll, size_t count, bool withTuner, CallSelection sel = {}) {
  PlanContext ctx = planContextOf(comm);
  if (!withTuner) ctx.tuner = nullptr;
  Plan p;
  p.nchannels = -1;
  if (planCollective(ctx, coll, count, 4, &p, sel) != ncclSuccess) p.nchannels = -1;
  return p;
}

inline bool samePlan(const Plan& a, const Plan& b) {
  return a.algorithm == b.algorithm && a.protocol == b.protocol && a.nchannels == b.nchannels &&
         a.chunkElems == b.chunkElems && a.doubling == b.doubling && a.singleCopy == b.singleCopy;
}

inline std::string describe(const Plan& p) {
  return std::string(algorithmName(p.algorithm)) + "/" + protocolName(p.protocol) + " x" +
         std::to_string(p.nchannels) + (p.doubling ? " doubling" : "") + (p.singleCopy ? " single-copy" : "") +
         " chunk " + std::to_string(p.chunkElems);
}

// An int32 sum AllReduce of `count` elements, in place, checked against
// n(n+1)/2 * (i % 251 + 1) exactly. Host communicators: null stream.
inline int allReduceExact(ncclComm_t comm, int rank, int nranks, size_t count, cudaStream_t stream = nullptr,
                          void (*wait)(cudaStream_t) = nullptr) {
  std::vector<int32_t> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = (rank + 1) * static_cast<int32_t>(i % 251 + 1);
  ncclResult_t r = ncclAllReduce(data.data(), data.data(), count, ncclInt32, ncclSum, comm, stream);
  RANK_CHECK(r == ncclSuccess, "rank %d: AllReduce of %zu: %s", rank, count, lastError().c_str());
  if (wait) wait(stream);
  const int32_t ranks = nranks * (nranks + 1) / 2;
  for (size_t i = 0; i < count; ++i)
    RANK_CHECK(data[i] == ranks * static_cast<int32_t>(i % 251 + 1), "rank %d: AllReduce of %zu: [%zu] = %d, not %d",
               rank, count, i, data[i], ranks * static_cast<int32_t>(i % 251 + 1));
  return 0;
}

}  // namespace gyre::test::tuner
