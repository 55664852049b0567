// A peer that dies or freezes at each stage of a communicator's life: during
// init, in the middle of a collective, during ncclCommDestroy, and stopped
// (SIGSTOP) while the others wait on it. Every surviving rank must return an
// error that names the peer (and the operation) within the bound, and after
// teardown hold no more fds, sockets or threads than before init.
//
// Host-memory communicators over shared memory inside the machine; the same
// cases over sockets run in tests/multiproc/faults_peer_death_sockets and on
// separate network namespaces in tests/netns/net_faults.sh. The device path
// (a peer killed while its kernel runs) is tests/device's "a device collective
// whose peer is killed" on the fake CUDA runtime.
#include <catch2/catch.hpp>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "../support/shared_flags.h"
#include "fault_row.h"

namespace {

using namespace gyre::test;

constexpr int kTimeout_s = 4;        // GYRE_TIMEOUT and GYRE_INIT_TIMEOUT
constexpr size_t kCount = 1 << 18;   // floats per call: the kill lands inside one

RankOptions baseOptions(int victim, double killDelay) {
  RankOptions o;
  o.timeout_s = 40;
  o.killRank = victim;
  o.killDelay_s = killDelay;
  o.env = {{"GYRE_TIMEOUT", std::to_string(kTimeout_s)}, {"GYRE_INIT_TIMEOUT", std::to_string(kTimeout_s)}};
  return o;
}

// Three allreduces every rank makes (a loop bounded by time would make ranks
// disagree on the number of calls); returns the first failure.
ncclResult_t warmUp(ncclComm_t comm) {
  std::vector<float> send(kCount, 1.0f), recv(kCount);
  for (int i = 0; i < 3; ++i)
    if (ncclResult_t r = ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr)) return r;
  return ncclSuccess;
}

// Allreduces until one fails (at most `limit_s`); returns its result.
ncclResult_t allreduceUntilFailure(ncclComm_t comm, double limit_s) {
  std::vector<float> send(kCount, 1.0f), recv(kCount);
  const double start = monotonicSeconds();
  ncclResult_t r;
  do {
    r = ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
  } while (r == ncclSuccess && monotonicSeconds() - start < limit_s);
  return r;
}

}  // namespace

TEST_CASE("a peer SIGKILLed inside init fails every other rank's init within GYRE_INIT_TIMEOUT, naming it",
          "[faults][kill]") {
  // The victim starts init at once and is killed 0.3 s later, while it waits in
  // the rendezvous for ranks that start only after 0.6 s: it dies registered
  // but never connected.
  const int shm = gyreShmSegments();
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        const Baseline b = takeBaseline();
        ncclComm_t comm = nullptr;
        if (rank == 2) {
          rankMark();
          rankRecord("t_fault", std::to_string(monotonicSeconds() + 0.3));
          gyreCommInitRankHost(&comm, n, id, rank, nullptr);
          pause();
          return 1;
        }
        usleep(600000);
        const double t0 = monotonicSeconds();
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        const std::string msg = lastError();
        recordOutcome(r, msg);
        RANK_CHECK(r != ncclSuccess, "rank %d: init succeeded with rank 2 dead", rank);
        // Rank 2 was in the peer table, so its listener was open: the rank
        // connecting to it is refused and the rank waiting for it probes it
        // (src/bootstrap/acceptor.h), both within about a second, well
        // before GYRE_INIT_TIMEOUT (it was 9 s, the timeout plus the root's
        // 5 s grace, when refusals were retried until the deadline).
        RANK_CHECK(monotonicSeconds() - t0 < kTimeout_s, "rank %d: init took %.1f s to fail", rank,
                   monotonicSeconds() - t0);
        RANK_CHECK(containsWord(msg, "rank 2"), "rank %d: error does not name rank 2: \"%s\"", rank, msg.c_str());
        const std::string left = recordLeftovers(b);
        RANK_CHECK(left.empty(), "rank %d: after the failed init: %s", rank, left.c_str());
        return 0;
      },
      baseOptions(2, 0.3));
  printRow("SIGKILL during init", result, shm);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a peer SIGKILLed mid-allreduce fails every survivor fast, naming it and the allreduce",
          "[faults][kill]") {
  const int shm = gyreShmSegments();
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        const Baseline b = takeBaseline();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init: %s", rank, lastError().c_str());
        RANK_CHECK(warmUp(comm) == ncclSuccess, "warm-up failed: %s", lastError().c_str());
        if (rank == 1) {
          rankRecord("t_fault", std::to_string(monotonicSeconds() + 0.2));
          rankMark();
        }
        r = allreduceUntilFailure(comm, 20);
        const std::string msg = lastError();
        recordOutcome(r, msg);
        RANK_CHECK(r != ncclSuccess, "rank %d: allreduces kept succeeding with rank 1 dead", rank);
        RANK_CHECK(containsWord(msg, "rank 1") && containsNoCase(msg, "allreduce"),
                   "rank %d: error names neither rank 1 nor the allreduce: \"%s\"", rank, msg.c_str());
        RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort: %s", lastError().c_str());
        const std::string left = recordLeftovers(b);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommAbort: %s", rank, left.c_str());
        return 0;
      },
      baseOptions(1, 0.2));
  printRow("SIGKILL mid-AllReduce (host memory, shm)", result, shm);
  INFO(result.describe());
  CHECK(result.allOk());
  for (const RankOutcome& r : result.ranks)
    if (r.rank != 1 && r.records.count("t_err"))
      CHECK(std::stod(r.records.at("t_err")) - std::stod(result.ranks[1].records.at("t_fault")) < 3.0);
}

TEST_CASE("a peer SIGKILLed during ncclCommDestroy leaves the others' destroy prompt and leak-free",
          "[faults][kill]") {
  const int shm = gyreShmSegments();
  SharedFlags flags;
  REQUIRE(flags.ok());
  RunResult result = runRanks(
      3,
      [&flags](int rank, int n, const ncclUniqueId& id) {
        const Baseline b = takeBaseline();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init: %s", rank, lastError().c_str());
        int64_t v = rank, sum = 0;
        r = ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, nullptr);
        RANK_CHECK(r == ncclSuccess && sum == 3, "rank %d: allreduce gave %d, sum %lld", rank, int(r),
                   (long long)sum);
        // Everyone reaches teardown together; the victim is killed as it enters.
        flags.markDone(rank);
        for (int p = 0; p < n; ++p) RANK_CHECK(flags.waitDone(p, 10), "rank %d never reached teardown", p);
        if (rank == 0) {
          recordFaultTime();
          rankMark();
          ncclCommDestroy(comm);
          pause();
          return 1;
        }
        const double t0 = monotonicSeconds();
        r = ncclCommDestroy(comm);
        const double took = monotonicSeconds() - t0;
        recordOutcome(r, r == ncclSuccess ? "" : lastError());
        RANK_CHECK(took < kTimeout_s + 2, "rank %d: ncclCommDestroy took %.1f s", rank, took);
        const std::string left = recordLeftovers(b);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommDestroy: %s", rank, left.c_str());
        return 0;
      },
      baseOptions(0, 0.0));
  printRow("SIGKILL during ncclCommDestroy", result, shm);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a SIGSTOPped peer fails the others at GYRE_TIMEOUT, the stalled rank named", "[faults][stop]") {
  // The victim stops itself mid-loop; the harness SIGKILLs it (as planned)
  // once the others have had GYRE_TIMEOUT and more to notice. A stopped
  // process looks alive (its sockets and shared memory stay open), so only
  // the timeout ends the wait, and a survivor blocked on the other survivor
  // (itself blocked on rank 2) can only name the rank it waits for; what is
  // asserted: every survivor fails in the window and some error names rank 2.
  const int shm = gyreShmSegments();
  SharedFlags flags;
  REQUIRE(flags.ok());
  RankOptions o = baseOptions(2, kTimeout_s + 6);
  RunResult result = runRanks(
      3,
      [&flags](int rank, int n, const ncclUniqueId& id) {
        const Baseline b = takeBaseline();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init: %s", rank, lastError().c_str());
        RANK_CHECK(warmUp(comm) == ncclSuccess, "warm-up failed: %s", lastError().c_str());
        if (rank == 2) {
          rankMark();
          recordFaultTime();
          raise(SIGSTOP);
          pause();
          return 1;
        }
        r = allreduceUntilFailure(comm, 3 * kTimeout_s);
        const std::string msg = lastError();
        recordOutcome(r, msg);
        RANK_CHECK(r != ncclSuccess, "rank %d: allreduces kept succeeding with rank 2 stopped", rank);
        rankRecord("error", msg);
        // The other survivor may still be waiting; its error should be its own.
        flags.markDone(rank);
        for (int p = 0; p < 2; ++p) RANK_CHECK(flags.waitDone(p, 2 * kTimeout_s), "survivor %d got no error", p);
        RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort: %s", lastError().c_str());
        const std::string left = recordLeftovers(b);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommAbort: %s", rank, left.c_str());
        return 0;
      },
      o);
  printRow("SIGSTOP mid-AllReduce (GYRE_TIMEOUT=4)", result, shm);
  INFO(result.describe());
  CHECK(result.allOk());
  bool named = false;
  for (const RankOutcome& r : result.ranks)
    if (r.records.count("error")) named |= containsWord(r.records.at("error"), "rank 2");
  CHECK(named);
  for (const RankOutcome& r : result.ranks) {
    if (r.rank == 2 || !r.records.count("t_err")) continue;
    const double t = std::stod(r.records.at("t_err")) - std::stod(result.ranks[2].records.at("t_fault"));
    INFO("rank " << r.rank << " failed " << t << " s after rank 2 stopped");
    CHECK(t > 0.5 * kTimeout_s);
    CHECK(t < kTimeout_s + 4);
  }
}
