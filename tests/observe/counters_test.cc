// Per-communicator counters: after the scripted calls (call_script.h) on 2
// host ranks, ncclCommDestroy with NCCL_DEBUG=INFO logs one line per API
// function with its calls, bytes and time, the path each collective ran on,
// and the group; every number is checked against the script.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "call_script.h"
#include "fork_ranks.h"
#include "log_dir.h"

using namespace gyre::test;

namespace {

// The counter lines of one rank's log, keyed by what follows "rank R: ".
std::map<std::string, std::string> counterLines(const std::string& log, int rank) {
  std::map<std::string, std::string> out;
  std::regex line("communicator ([0-9a-f]{16}) rank " + std::to_string(rank) + ": ((nccl[A-Za-z]+|groups): [^\n]*)");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) out[(*it)[3]] = (*it)[2];
  return out;
}

}  // namespace

TEST_CASE("ncclCommDestroy logs each API function's calls, bytes, time and paths at INFO", "[observe]") {
  LogDir logs;
  REQUIRE(logs.ok());
  RankOptions options;
  options.timeout_s = 60;
  options.env = {{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "COLL"}, {"NCCL_DEBUG_FILE", logs.pattern()}};
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s", lastError().c_str());
        if (!runCallScript(comm, rank)) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  REQUIRE(result.allOk());
  for (int rank = 0; rank < 2; ++rank) {
    // Ranks forked from a process that logged already share its log file:
    // the lines name their rank.
    const std::string log = logs.allText();
    INFO("log:\n" << log.substr(0, 6000));
    auto lines = counterLines(log, rank);
    // calls, bytes by API function (from the script).
    std::map<std::string, std::pair<int, size_t>> expected;
    std::map<std::string, int> grouped, ran;
    for (const ScriptedCall& c : script()) {
      expected[c.api].first += 1;
      expected[c.api].second += c.count * c.typeSize;
      grouped[c.api] += c.grouped ? 1 : 0;
      ran[c.api] += c.count > 0 ? 1 : 0;
    }
    for (const auto& [api, want] : expected) {
      INFO(api);
      REQUIRE(lines.count(api) == 1);
      const std::string& l = lines[api];
      CHECK(l.find(api + ": " + std::to_string(want.first) + " calls, " + std::to_string(want.second) + " B, ") == 0);
      if (grouped[api]) {
        CHECK(l.find("(" + std::to_string(grouped[api]) + " calls in groups, timed with them)") != std::string::npos);
      } else {
        // Lone calls are timed: a positive time.
        std::smatch m;
        REQUIRE(std::regex_search(l, m, std::regex(" B, ([0-9.]+) (us|ms|s)")));
        CHECK(std::stod(m[1]) > 0);
      }
      // Every call with elements ran on exactly one path; the calls on all paths add up.
      std::regex path("(Ring|Tree|Direct|Doubling|SingleCopy|PointToPoint) ([0-9]+) calls ([0-9]+) B");
      int pathCalls = 0;
      size_t pathBytes = 0;
      for (std::sregex_iterator it(l.begin(), l.end(), path), end; it != end; ++it) {
        pathCalls += std::stoi((*it)[2]);
        pathBytes += std::stoul((*it)[3]);
        if (api == "ncclSend" || api == "ncclRecv") CHECK((*it)[1] == "PointToPoint");
        else CHECK((*it)[1] != "PointToPoint");
      }
      CHECK(pathCalls == ran[api]);
      CHECK(pathBytes == want.second);
    }
    REQUIRE(lines.count("groups") == 1);
    CHECK(lines["groups"].find("groups: 1 ncclGroupEnd, ") == 0);
  }
}
