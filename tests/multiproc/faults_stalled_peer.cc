// A peer that stays alive but never calls the collective. Either GYRE_TIMEOUT bounds
// the wait and the error names the peer, or ncclCommAbort from a second thread
// unblocks the call at once (GYRE_TIMEOUT is then set far beyond the bound, so only
// the abort can be what unblocks it).
#include <catch2/catch.hpp>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "../support/fork_ranks.h"

namespace {

using namespace gyre::test;

constexpr double kAbortAfter_s = 0.5;   // how long the call is left blocked
constexpr double kPromptBound_s = 2.5;  // abort must unblock it within this ("< ~2 s")
constexpr double kPeerHold_s = 4;       // the silent peer stays alive this long

// Rank 0 calls ncclAllReduce of `count` floats and is aborted from another thread;
// rank 1 stays alive without calling, then aborts its own communicator.
void expectAbortUnblocks(size_t count) {
  RankOptions options;
  options.timeout_s = 30;
  options.env = {{"GYRE_TIMEOUT", "60"}, {"GYRE_INIT_TIMEOUT", "10"}};
  RunResult result = runRanks(
      2,
      [count](int rank, int n, const ncclUniqueId& id) {
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());

        if (rank == 1) {
          usleep(useconds_t(kPeerHold_s * 1e6));
          r = ncclCommAbort(comm);
          RANK_CHECK(r == ncclSuccess, "rank 1: ncclCommAbort returned %d: %s", int(r),
                     lastError().c_str());
          return 0;
        }

        std::vector<float> send(count, 1.0f), recv(count);
        std::atomic<double> abortStart{0}, abortEnd{0};
        std::atomic<int> abortResult{-1};
        std::thread aborter([&] {
          usleep(useconds_t(kAbortAfter_s * 1e6));
          abortStart = monotonicSeconds();
          abortResult = int(ncclCommAbort(comm));
          abortEnd = monotonicSeconds();
        });
        const double callStart = monotonicSeconds();
        rankProgress("allreduce to be aborted");
        r = ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr);
        const double callEnd = monotonicSeconds();
        const std::string msg = lastError();
        rankProgress("joining the aborting thread");
        aborter.join();

        // A call made after the abort may rightly say the communicator is gone; this
        // test is about a call that was already blocked.
        RANK_CHECK(callStart < abortStart.load() - 0.1,
                   "test setup: the allreduce started only %.3f s before the abort; raise "
                   "kAbortAfter_s", abortStart.load() - callStart);
        RANK_CHECK(r != ncclSuccess, "rank 0: allreduce without its peer returned success");
        RANK_CHECK(callEnd >= abortStart.load() - 0.05,
                   "rank 0: allreduce returned %d after %.2f s, before the abort: %s", int(r),
                   callEnd - callStart, msg.c_str());
        RANK_CHECK(callEnd - abortStart.load() < kPromptBound_s,
                   "rank 0: allreduce returned %.2f s after ncclCommAbort started",
                   callEnd - abortStart.load());
        RANK_CHECK(containsNoCase(msg, "abort"), "rank 0: error %d does not mention the abort: \"%s\"",
                   int(r), msg.c_str());
        RANK_CHECK(abortResult.load() == int(ncclSuccess), "rank 0: ncclCommAbort returned %d",
                   abortResult.load());
        RANK_CHECK(abortEnd.load() - abortStart.load() < kPromptBound_s + 1,
                   "rank 0: ncclCommAbort took %.2f s", abortEnd.load() - abortStart.load());
        const std::string left = waitForBaseline(fds, threads, fdsBefore);
        RANK_CHECK(left.empty(), "rank 0: after ncclCommAbort: %s", left.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

// Ranks other than `silent` call an allreduce that `silent` never joins; with
// GYRE_TIMEOUT=2 each must fail within a bounded time, and with 2 ranks the error
// must name the silent peer and the collective: a stalled peer turns into an
// error on every surviving rank that names the peer and the collective.
void expectTimeoutOnSilentPeer(int nranks, int silent) {
  constexpr int kTimeout_s = 2;
  RankOptions options;
  options.timeout_s = 40;
  options.env = {{"GYRE_TIMEOUT", std::to_string(kTimeout_s)}, {"GYRE_INIT_TIMEOUT", "10"}};
  RunResult result = runRanks(
      nranks,
      [silent](int rank, int n, const ncclUniqueId& id) {
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        if (rank == silent) {
          // Alive and connected, but never calling: stay until the others gave up.
          usleep(useconds_t((2 * kTimeout_s + 1) * 1e6));
          r = ncclCommAbort(comm);
          RANK_CHECK(r == ncclSuccess, "rank %d: ncclCommAbort returned %d", rank, int(r));
          return 0;
        }
        std::vector<int32_t> send(4096, 1), recv(4096);
        const double t0 = monotonicSeconds();
        rankProgress("allreduce without the silent peer");
        r = ncclAllReduce(send.data(), recv.data(), send.size(), ncclInt32, ncclSum, comm, nullptr);
        const double elapsed = monotonicSeconds() - t0;
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "rank %d: allreduce without rank %d returned success", rank,
                   silent);
        RANK_CHECK(elapsed >= 0.5 * kTimeout_s && elapsed < 15,
                   "rank %d: allreduce gave up after %.2f s with GYRE_TIMEOUT=%d: %s", rank, elapsed,
                   kTimeout_s, msg.c_str());
        if (n == 2) {
          const std::string who = "rank " + std::to_string(silent);
          RANK_CHECK(containsWord(msg, who) && containsNoCase(msg, "allreduce"),
                     "rank %d: timeout error %d does not name %s and the collective: \"%s\"", rank,
                     int(r), who.c_str(), msg.c_str());
        }
        ncclResult_t async = ncclSuccess;
        r = ncclCommGetAsyncError(comm, &async);
        RANK_CHECK(r == ncclSuccess && async != ncclSuccess,
                   "rank %d: ncclCommGetAsyncError returned %d with async error %d", rank, int(r),
                   int(async));
        r = ncclCommAbort(comm);
        RANK_CHECK(r == ncclSuccess, "rank %d: ncclCommAbort returned %d: %s", rank, int(r),
                   lastError().c_str());
        const std::string left = waitForBaseline(fds, threads, fdsBefore);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommAbort: %s", rank, left.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace

TEST_CASE("an allreduce whose peer never calls fails after GYRE_TIMEOUT and names that peer",
          "[faults][timeout]") {
  expectTimeoutOnSilentPeer(2, 1);
}

TEST_CASE("with 3 ranks and rank 2 silent, ranks 0 and 1 both give up within GYRE_TIMEOUT",
          "[faults][timeout]") {
  expectTimeoutOnSilentPeer(3, 2);
}

TEST_CASE("ncclCommAbort from a second thread promptly unblocks an allreduce waiting on its peer",
          "[faults][abort]") {
  expectAbortUnblocks(1024);
}

TEST_CASE("ncclCommAbort unblocks an allreduce stuck sending 32 MiB the peer never reads",
          "[faults][abort]") {
  expectAbortUnblocks(8u << 20);
}
