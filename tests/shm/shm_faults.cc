// The shared-memory transport leaves nothing behind and turns a dead peer
// into a prompt error. Its segments are anonymous memfds, so /dev/shm must
// never hold a gyre entry, not during a run, not after a normal exit and not
// after a SIGKILL; survivors of a SIGKILLed rank learn of its death through
// the handshake socket (EOF) or a neighbour's abort notice in the shared
// header, long before GYRE_TIMEOUT, and name it.
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../support/fork_ranks.h"
#include "shm_test_util.h"

namespace {

using namespace gyre::test;

constexpr int kPeerTimeout_s = 30;    // GYRE_TIMEOUT: detection must not rely on it
constexpr double kDetectBound_s = 3;  // the failing call must end within this

// Runs on a launcher thread while the ranks run: notes every gyre name that
// ever appears in /dev/shm (the harness's parentTask).
void watchDevShm(const RunContext& ctx) {
  std::set<std::string> seen;
  while (!ctx.finished->load()) {
    for (const auto& n : gyreEntriesInDevShm()) seen.insert(n);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  taskRecord("seen in /dev/shm", joined(std::vector<std::string>(seen.begin(), seen.end())));
}

}  // namespace

TEST_CASE("a normal run over shared memory never puts an entry in /dev/shm and unmaps every segment",
          "[shm][leaks]") {
  const auto before = gyreEntriesInDevShm();
  RankOptions options;
  options.timeout_s = 60;
  options.env = {{"GYRE_TIMEOUT", "20"}, {"GYRE_INIT_TIMEOUT", "20"}, {"NCCL_SHM_DISABLE", std::nullopt}};
  options.parentTask = watchDevShm;
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "init returned %d: %s", int(r), lastError().c_str());
        RANK_CHECK(countShmMappings() > 0, "rank %d: no shared-memory segment mapped", rank);
        std::vector<float> buf(300000, 1.0f);
        for (int i = 0; i < 5; ++i) {
          r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
          RANK_CHECK(r == ncclSuccess, "allreduce returned %d: %s", int(r), lastError().c_str());
        }
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed");
        RANK_CHECK(countShmMappings() == 0, "rank %d: %d segments still mapped", rank, countShmMappings());
        const std::string left = waitForBaseline(fds, threads, fdsBefore);
        RANK_CHECK(left.empty(), "rank %d after destroy: %s", rank, left.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  CHECK(result.taskRecords["seen in /dev/shm"] == joined(before));
  CHECK(joined(gyreEntriesInDevShm()) == joined(before));
}

TEST_CASE("when a rank is SIGKILLed mid-allreduce over shared memory, survivors fail fast naming it and "
          "nothing is left in /dev/shm",
          "[shm][peer-death]") {
  const int nranks = GENERATE(2, 3, 4);
  const int victim = GENERATE(0, 1);
  INFO(nranks << " ranks, rank " << victim << " killed");
  const auto before = gyreEntriesInDevShm();
  RankOptions options;
  options.timeout_s = 40;
  options.killRank = victim;
  options.killDelay_s = 0.1;
  options.env = {{"GYRE_TIMEOUT", std::to_string(kPeerTimeout_s)}, {"GYRE_INIT_TIMEOUT", "20"},
                 {"NCCL_SHM_DISABLE", std::nullopt}};
  options.parentTask = watchDevShm;
  RunResult result = runRanks(
      nranks,
      [victim](int rank, int n, const ncclUniqueId& id) {
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        ncclComm_t comm = nullptr;
        rankProgress("init");
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "init returned %d: %s", int(r), lastError().c_str());
        RANK_CHECK(countShmMappings() > 0, "rank %d: no shared-memory segment mapped", rank);
        std::vector<float> send(1 << 19, 1.0f), recv(send.size());
        r = ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat32, ncclSum, comm, nullptr);
        RANK_CHECK(r == ncclSuccess, "warm-up returned %d: %s", int(r), lastError().c_str());
        if (rank == victim) rankMark();  // SIGKILLed 0.1 s from now, inside one of the calls below

        rankProgress("allreduces until one fails");
        const double loopStart = monotonicSeconds();
        double callStart = 0;
        do {
          callStart = monotonicSeconds();
          r = ncclAllReduce(send.data(), recv.data(), send.size(), ncclFloat32, ncclSum, comm, nullptr);
        } while (r == ncclSuccess && monotonicSeconds() - loopStart < 15);
        const double callTime = monotonicSeconds() - callStart;
        const std::string msg = lastError();
        RANK_CHECK(rank != victim, "rank %d should have been killed", rank);
        RANK_CHECK(r != ncclSuccess, "rank %d: allreduce kept succeeding after rank %d died", rank, victim);
        RANK_CHECK(callTime < kDetectBound_s, "rank %d: the failing call took %.2f s (GYRE_TIMEOUT=%d): %s", rank,
                   callTime, kPeerTimeout_s, msg.c_str());
        const std::string who = "rank " + std::to_string(victim);
        RANK_CHECK(containsWord(msg, who), "rank %d: the error does not name %s: \"%s\"", rank, who.c_str(),
                   msg.c_str());
        rankProgress("ncclCommAbort");
        RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort failed: %s", lastError().c_str());
        RANK_CHECK(countShmMappings() == 0, "rank %d: %d segments still mapped after abort", rank,
                   countShmMappings());
        const std::string left = waitForBaseline(fds, threads, fdsBefore);
        RANK_CHECK(left.empty(), "rank %d after abort: %s", rank, left.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  REQUIRE(result.ranks.size() == size_t(nranks));
  CHECK(result.ranks[victim].killedAsPlanned);
  CHECK(result.taskRecords["seen in /dev/shm"] == joined(before));
  CHECK(joined(gyreEntriesInDevShm()) == joined(before));
}
