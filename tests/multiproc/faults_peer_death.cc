// A rank SIGKILLed in the middle of a run of allreduces: every survivor's call must
// fail soon after (its sockets close; GYRE_TIMEOUT is far away), the error must name
// the dead rank, even on ranks that are not its ring neighbours, the communicator's
// async error must be set, and ncclCommAbort (or ncclCommDestroy) must then return
// promptly and release every fd and thread.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "../support/shared_flags.h"

namespace {

using namespace gyre::test;

constexpr int kPeerTimeout_s = 10;          // GYRE_TIMEOUT: failure must come well before it
constexpr double kDetectBound_s = 5;        // ... within this, for the call that fails
constexpr size_t kCount = 1 << 20;          // floats per call: long enough to be killed inside

struct KillPlan {
  int nranks;
  int victim;
  IdMode mode;
  const char* buffSize;  // NCCL_BUFFSIZE, or nullptr for the default
  bool destroy;          // survivors tear down with ncclCommDestroy instead of ncclCommAbort
};

void expectSurvivorsNameTheDead(const KillPlan& plan) {
  RankOptions options;
  options.idMode = plan.mode;
  options.timeout_s = 30;
  options.killRank = plan.victim;
  options.killDelay_s = 0.2;
  options.env = {{"GYRE_TIMEOUT", std::to_string(kPeerTimeout_s)}, {"GYRE_INIT_TIMEOUT", "10"}};
  if (plan.buffSize) options.env.push_back({"NCCL_BUFFSIZE", plan.buffSize});
  const int victim = plan.victim;
  const bool destroy = plan.destroy;
  // Over sockets an abort notice travels only with the data, downstream: a
  // survivor that tears down first is, to the rank sending to it, a lost
  // connection rather than word of the dead rank. So there the survivors
  // tear down only once each has its error (shared memory tells both ways).
  const char* shmOff = getenv("NCCL_SHM_DISABLE");
  const bool survivorsWait = shmOff && shmOff[0] == '1';
  SharedFlags flags;
  REQUIRE(flags.ok());

  RunResult result = runRanks(
      plan.nranks,
      [victim, destroy, survivorsWait, &flags](int rank, int n, const ncclUniqueId& id) {
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        ncclComm_t comm = nullptr;
        rankProgress("init");
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        rankProgress("warm-up allreduces");
        std::vector<float> send(kCount, 1.0f), recv(kCount);
        for (int i = 0; i < 3; ++i) {
          r = ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
          RANK_CHECK(r == ncclSuccess, "rank %d: warm-up call %d returned %d: %s", rank, i, int(r),
                     lastError().c_str());
        }
        if (rank == victim) rankMark();  // the parent SIGKILLs this rank 0.2 s from now

        rankProgress("allreduces until one fails");
        const double loopStart = monotonicSeconds();
        double callStart = 0;
        do {
          callStart = monotonicSeconds();
          r = ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
        } while (r == ncclSuccess && monotonicSeconds() - loopStart < 20);
        const double callTime = monotonicSeconds() - callStart;
        const std::string msg = lastError();
        RANK_CHECK(rank != victim, "rank %d was to be killed but is still running (last result %d)",
                   rank, int(r));
        RANK_CHECK(r != ncclSuccess, "rank %d: allreduce kept succeeding for 20 s after rank %d died",
                   rank, victim);
        RANK_CHECK(callTime < kDetectBound_s,
                   "rank %d: the failing call took %.2f s (GYRE_TIMEOUT=%d): %s", rank, callTime,
                   kPeerTimeout_s, msg.c_str());
        const std::string who = "rank " + std::to_string(victim);
        RANK_CHECK(containsWord(msg, who), "rank %d: error %d does not name %s: \"%s\"", rank,
                   int(r), who.c_str(), msg.c_str());

        ncclResult_t async = ncclSuccess;
        r = ncclCommGetAsyncError(comm, &async);
        RANK_CHECK(r == ncclSuccess && async != ncclSuccess,
                   "rank %d: ncclCommGetAsyncError returned %d with async error %d", rank, int(r),
                   int(async));

        if (survivorsWait) {
          flags.markDone(rank);
          for (int p = 0; p < n; ++p)
            RANK_CHECK(p == victim || flags.waitDone(p, 20), "rank %d: survivor %d never got its error", rank, p);
        }
        const char* teardown = destroy ? "ncclCommDestroy" : "ncclCommAbort";
        rankProgress(teardown);
        const double teardownStart = monotonicSeconds();
        r = destroy ? ncclCommDestroy(comm) : ncclCommAbort(comm);
        const double teardownTime = monotonicSeconds() - teardownStart;
        RANK_CHECK(destroy || r == ncclSuccess, "rank %d: ncclCommAbort returned %d: %s", rank,
                   int(r), lastError().c_str());
        RANK_CHECK(teardownTime < kDetectBound_s, "rank %d: %s took %.2f s", rank, teardown,
                   teardownTime);
        const std::string left = waitForBaseline(fds, threads, fdsBefore);
        RANK_CHECK(left.empty(), "rank %d: after %s: %s", rank, teardown, left.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  REQUIRE(result.ranks.size() == size_t(plan.nranks));
  CHECK(result.ranks[victim].killedAsPlanned);
  CHECK(result.elapsed_s < 28);
}

}  // namespace

TEST_CASE("when rank 1 of 2 is SIGKILLed mid-allreduce, rank 0 fails fast and names rank 1",
          "[faults][peer-death]") {
  expectSurvivorsNameTheDead({2, 1, IdMode::kParent, nullptr, false});
}

TEST_CASE("when the rendezvous host rank 0 of 3 is SIGKILLed mid-allreduce, ranks 1 and 2 name it",
          "[faults][peer-death]") {
  expectSurvivorsNameTheDead({3, 0, IdMode::kEnvCommId, nullptr, false});
}

TEST_CASE("when rank 2 of 4 is SIGKILLed, rank 0, not its ring neighbour, still names rank 2",
          "[faults][peer-death]") {
  expectSurvivorsNameTheDead({4, 2, IdMode::kParent, nullptr, false});
}

TEST_CASE("with small pipeline chunks, every survivor of 4 ranks names the SIGKILLed rank 1",
          "[faults][peer-death]") {
  expectSurvivorsNameTheDead({4, 1, IdMode::kEnvCommId, "65536", false});
}

TEST_CASE("after rank 0 of 3 is SIGKILLed, ncclCommDestroy on the survivors returns and frees all",
          "[faults][peer-death]") {
  expectSurvivorsNameTheDead({3, 0, IdMode::kParent, nullptr, true});
}
