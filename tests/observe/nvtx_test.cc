// NVTX ranges: with NVTX_INJECTION64_PATH naming the recording injection
// (nvtx_recorder.cc, path in OBSERVE_NVTX_RECORDER), each of 2 host ranks
// running the scripted calls (call_script.h) shows one range per call in
// the domain "NCCL", named as NCCL names the function, whose payload
// (decoded through the schema gyre registered) carries the communicator id
// (the same on both ranks), rank, rank count, count, bytes, datatype,
// operator and root or peer; the group's Send and Recv sit inside one
// "ncclGroup" range; every push has its pop. NCCL_NVTX_DISABLE=1: no ranges.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "call_script.h"
#include "fork_ranks.h"

using namespace gyre::test;

namespace {

RunResult runWithRecorder(const std::string& recorder, bool disable) {
  RankOptions options;
  options.timeout_s = 60;
  options.env = {{"NVTX_INJECTION64_PATH", recorder}};
  if (disable) options.env.push_back({"NCCL_NVTX_DISABLE", "1"});
  return runRanks(
      2,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s", lastError().c_str());
        if (!runCallScript(comm, rank)) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        void* lib = dlopen(recorder.c_str(), RTLD_NOW | RTLD_NOLOAD);
        std::string log;
        if (lib) {
          auto fn = reinterpret_cast<const char* (*)()>(dlsym(lib, "gyretest_nvtx_log"));
          RANK_CHECK(fn != nullptr, "the recorder lacks gyretest_nvtx_log");
          log = fn();
        }
        rankRecordLines(log);
        return 0;
      },
      options);
}

}  // namespace

TEST_CASE("each API call is an NVTX range named as NCCL's with the call's payload", "[observe]") {
  const char* recorder = getenv("OBSERVE_NVTX_RECORDER");
  REQUIRE(recorder);
  RunResult result = runWithRecorder(recorder, false);
  INFO(result.describe());
  REQUIRE(result.allOk());
  std::string commId;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> lines = recordedLines(result.ranks[rank]);
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    INFO("rank " << rank << ":\n" << all);
    CHECK(all.find("schema gyre call 8 entries") != std::string::npos);
    // The NCCL domain's pushes, in order, and the nesting depth at each.
    std::vector<std::string> pushes;
    std::vector<int> depthAt;
    int depth = 0, maxDepth = 0;
    for (const std::string& l : lines) {
      if (l.rfind("push NCCL ", 0) == 0) {
        pushes.push_back(l.substr(10));
        depthAt.push_back(depth);
        maxDepth = std::max(maxDepth, ++depth);
      } else if (l == "pop NCCL") {
        CHECK(depth > 0);
        --depth;
      }
    }
    CHECK(depth == 0);
    // The calls outside the group, then the group with its Send and Recv inside.
    REQUIRE(pushes.size() == script().size() + 1);
    size_t p = 0;
    for (const ScriptedCall& c : script()) {
      if (c.grouped && p < pushes.size() && pushes[p] == "ncclGroup") {
        CHECK(depthAt[p] == 0);
        ++p;
      }
      REQUIRE(p < pushes.size());
      const std::string& range = pushes[p];
      INFO("call " << c.api << ": " << range);
      CHECK(range.rfind(std::string(c.api) + " ", 0) == 0);
      CHECK(depthAt[p] == (c.grouped ? 1 : 0));
      std::smatch m;
      REQUIRE(std::regex_search(range, m, std::regex(" Communicator=([0-9]+);")));
      if (commId.empty()) commId = m[1];
      CHECK(m[1] == commId);
      const int root = c.p2p ? 1 - rank : c.root;
      const std::string expected = " Rank=" + std::to_string(rank) + "; Ranks=2; Count=" + std::to_string(c.count) +
                                   "; Message size [bytes]=" + std::to_string(c.count * c.typeSize) +
                                   "; Datatype=" + c.typeName + "; Reduction operation=" + c.op +
                                   "; Root or peer=" + std::to_string(root) + ";";
      CHECK(range.find(expected) != std::string::npos);
      ++p;
    }
  }
}

TEST_CASE("NCCL_NVTX_DISABLE=1 emits no NVTX ranges", "[observe]") {
  const char* recorder = getenv("OBSERVE_NVTX_RECORDER");
  REQUIRE(recorder);
  RunResult result = runWithRecorder(recorder, true);
  INFO(result.describe());
  REQUIRE(result.allOk());
  for (const RankOutcome& r : result.ranks)
    for (const std::string& l : recordedLines(r)) CHECK(l.rfind("push NCCL", 0) != 0);
}
