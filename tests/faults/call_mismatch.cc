// Ranks that disagree about the call: one rank makes a different collective,
// or passes a different count, datatype, reduction op or root. No rank may
// hang: every rank fails within GYRE_TIMEOUT (plus a margin), and the rank
// that detects it says "mismatched" and names the rank that disagrees.
// (tests/collectives/bad_input_test.cc covers count and datatype in more
// shapes; here each kind of disagreement is one row of the fault matrix.)
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "fault_row.h"

namespace {

using namespace gyre::test;

constexpr int kTimeout_s = 4;
constexpr size_t kCount = 3000;
constexpr int kRanks = 3;

using Call = std::function<ncclResult_t(int rank, ncclComm_t comm, std::vector<int32_t>& in, std::vector<int32_t>& out)>;

// What the ranks must say. kMismatched: some rank's error says "mismatched"
// and names the odd rank and another, and every rank fails well before
// GYRE_TIMEOUT. kRootInCall: the rank that receives a step stamped with another
// root fails the call itself, saying "mismatched" and naming both ranks and
// both roots; a rank whose part of the call needs nothing from the odd
// rank's chain (the root only sends) completes it, and its next call fails.
enum class Expect { kMismatched, kRootInCall };

void expectMismatchReported(const char* name, int oddRank, const Call& call, Expect expect = Expect::kMismatched,
                            const decltype(RankOptions::env)& extraEnv = {}) {
  RankOptions o;
  o.timeout_s = 40;
  o.env = {{"GYRE_TIMEOUT", std::to_string(kTimeout_s)}, {"GYRE_INIT_TIMEOUT", "10"}};
  o.env.insert(o.env.end(), extraEnv.begin(), extraEnv.end());
  const int shm = gyreShmSegments();
  const double start = monotonicSeconds();
  RunResult result = runRanks(
      kRanks,
      [&call, expect](int rank, int n, const ncclUniqueId& id) {
        const Baseline b = takeBaseline();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init: %s", rank, lastError().c_str());
        std::vector<int32_t> in(kCount * n, rank + 1), out(kCount * n);
        const double t0 = monotonicSeconds();
        rankRecord("t_call", std::to_string(t0));
        r = call(rank, comm, in, out);
        if (expect == Expect::kRootInCall && r != ncclSuccess) rankRecord("in_call", lastError());
        if (expect == Expect::kRootInCall && r == ncclSuccess) {
          std::vector<int64_t> v(kCount, rank + 1), sum(kCount);
          r = ncclAllReduce(v.data(), sum.data(), kCount, ncclInt64, ncclSum, comm, nullptr);
        }
        const std::string msg = lastError();
        recordOutcome(r, msg);
        rankRecord("error", msg);
        RANK_CHECK(r != ncclSuccess, "rank %d: the mismatched call succeeded", rank);
        RANK_CHECK(containsWord(msg, "rank 0") || containsWord(msg, "rank 1") || containsWord(msg, "rank 2"),
                   "rank %d: the error names no rank: %s", rank, msg.c_str());
        RANK_CHECK(monotonicSeconds() - t0 < kTimeout_s + 3, "rank %d: took %.1f s to fail", rank,
                   monotonicSeconds() - t0);
        if (expect == Expect::kMismatched)
          RANK_CHECK(monotonicSeconds() - t0 < kTimeout_s - 1, "rank %d: took %.1f s to fail, near GYRE_TIMEOUT=%d",
                     rank, monotonicSeconds() - t0, kTimeout_s);
        ncclCommAbort(comm);
        const std::string left = recordLeftovers(b);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommAbort: %s", rank, left.c_str());
        return 0;
      },
      o);
  printRow(name, result, shm, start);
  INFO(name);
  INFO(result.describe());
  CHECK(result.allOk());
  // Someone names the disagreement: "mismatched" with the odd rank and one
  // that disagrees with it.
  bool named = false;
  for (const RankOutcome& r : result.ranks) {
    auto it = r.records.find("error");
    if (it == r.records.end()) continue;
    const std::string& e = it->second;
    bool other = false;
    for (int p = 0; p < kRanks; ++p) other |= p != oddRank && containsWord(e, "rank " + std::to_string(p));
    named |= containsNoCase(e, "mismatched") && containsWord(e, "rank " + std::to_string(oddRank)) && other;
  }
  if (expect == Expect::kMismatched) CHECK(named);
  if (expect == Expect::kRootInCall) {
    // The call itself, on some rank, names the odd rank, a rank that
    // disagrees with it, and both roots.
    bool inCall = false;
    for (const RankOutcome& r : result.ranks) {
      auto it = r.records.find("in_call");
      if (it == r.records.end()) continue;
      const std::string& e = it->second;
      bool other = false;
      for (int p = 0; p < kRanks; ++p) other |= p != oddRank && containsWord(e, "rank " + std::to_string(p));
      inCall |= containsNoCase(e, "mismatched") && containsWord(e, "rank " + std::to_string(oddRank)) && other &&
                containsWord(e, "root 0") && containsWord(e, "root 1");
    }
    CHECK(inCall);
  }
}

}  // namespace

TEST_CASE("rank 2 calling AllGather while the others call AllReduce is reported as mismatched at once",
          "[faults][mismatch]") {
  // At this size the AllReduce runs on the trees and the AllGather on the
  // rings: different connections, so no slot of one reaches the other's
  // own check. Rank 0, stalled in its tree AllReduce, finds rank 2's ring
  // step stamped with the same call number on a connection its call does
  // not use (src/host/foreign_steps.h) and names both calls; the others
  // learn it from rank 0's abort notice. (Before, every rank waited until
  // GYRE_TIMEOUT.)
  expectMismatchReported("different collectives (AllGather on rings vs AllReduce on trees)", 2,
                         [](int rank, ncclComm_t comm, std::vector<int32_t>& in, std::vector<int32_t>& out) {
                           if (rank == 2) return ncclAllGather(in.data(), out.data(), kCount, ncclInt32, comm, nullptr);
                           return ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr);
                         });
}

TEST_CASE("rank 1 passing a larger count to AllReduce is reported as mismatched, naming rank 1",
          "[faults][mismatch]") {
  expectMismatchReported("different counts (AllReduce 3000 vs 4000)", 1,
                         [](int rank, ncclComm_t comm, std::vector<int32_t>& in, std::vector<int32_t>& out) {
                           return ncclAllReduce(in.data(), out.data(), rank == 1 ? kCount + 1000 : kCount, ncclInt32,
                                                ncclSum, comm, nullptr);
                         });
}

TEST_CASE("rank 0 passing float32 where the others pass int32 is reported as mismatched, naming rank 0",
          "[faults][mismatch]") {
  expectMismatchReported("different datatypes (float32 vs int32)", 0,
                         [](int rank, ncclComm_t comm, std::vector<int32_t>& in, std::vector<int32_t>& out) {
                           return ncclAllReduce(in.data(), out.data(), kCount, rank == 0 ? ncclFloat32 : ncclInt32,
                                                ncclSum, comm, nullptr);
                         });
}

TEST_CASE("rank 1 reducing with max where the others sum is reported as mismatched, naming rank 1",
          "[faults][mismatch]") {
  expectMismatchReported("different ops (max vs sum)", 1,
                         [](int rank, ncclComm_t comm, std::vector<int32_t>& in, std::vector<int32_t>& out) {
                           return ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, rank == 1 ? ncclMax : ncclSum,
                                                comm, nullptr);
                         });
}

TEST_CASE("ranks disagreeing on a Broadcast root: the Broadcast itself fails naming both roots",
          "[faults][mismatch]") {
  // A slot's metadata carries the root of Broadcast and Reduce. On the ring
  // 0 1 2, rank 2, thinking the root is 1, receives rank 1's forward of root
  // 0's data stamped "root 0" and fails the Broadcast naming ranks 1 and 2
  // and both roots. Ranks 0 and 1 need nothing from rank 2 in this call and
  // may complete it; their next call then fails (rank 2's abort notice). The
  // ring is forced: on 3 ranks the tuner picks the Direct broadcast at this
  // size, where rank 2 waits for rank 1 instead and fails at GYRE_TIMEOUT.
  expectMismatchReported("different roots (Broadcast root 1 vs 0, ring): found by the Broadcast itself", 2,
                         [](int rank, ncclComm_t comm, std::vector<int32_t>& in, std::vector<int32_t>& out) {
                           return ncclBroadcast(in.data(), out.data(), kCount, ncclInt32, rank == 2 ? 1 : 0, comm,
                                                nullptr);
                         },
                         Expect::kRootInCall, {{"NCCL_ALGO", "Ring"}});
}

TEST_CASE("ranks disagreeing on a Broadcast root on the Direct algorithm are reported as mismatched at once",
          "[faults][mismatch]") {
  // Direct: every rank reads its root's connection only. Ranks 0 and 1
  // (root 0) complete the Broadcast; rank 2, thinking the root is 1, waits on
  // rank 1, whose next call's step arrives there and is reported as a
  // mismatch naming ranks 1 and 2. The roots are not named: rank 1's step is
  // of the next call, and root 0's step on a connection rank 2 does not read
  // is looked at only after a 20 ms stall (foreign_steps.h).
  expectMismatchReported("different roots (Broadcast root 1 vs 0, Direct)", 2,
                         [](int rank, ncclComm_t comm, std::vector<int32_t>& in, std::vector<int32_t>& out) {
                           ncclResult_t r = ncclBroadcast(in.data(), out.data(), kCount, ncclInt32,
                                                          rank == 2 ? 1 : 0, comm, nullptr);
                           // The next call is what reaches rank 2.
                           if (r == ncclSuccess)
                             r = ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr);
                           return r;
                         },
                         Expect::kMismatched, {{"NCCL_ALGO", "Direct"}});
}

TEST_CASE("ranks disagreeing on a Reduce root: the Reduce itself fails naming both roots", "[faults][mismatch]") {
  // On the ring 0 1 2 the chain to root 0 is 1 -> 2 -> 0; rank 2, thinking
  // the root is 1, starts its own chain 2 -> 0 -> 1, so rank 0 receives a
  // step stamped "root 1" and fails the Reduce naming ranks 2 and 0 and both
  // roots. (Ring forced for the same reason as the Broadcast row.)
  expectMismatchReported("different roots (Reduce root 1 vs 0, ring): found by the Reduce itself", 2,
                         [](int rank, ncclComm_t comm, std::vector<int32_t>& in, std::vector<int32_t>& out) {
                           return ncclReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, rank == 2 ? 1 : 0,
                                             comm, nullptr);
                         },
                         Expect::kRootInCall, {{"NCCL_ALGO", "Ring"}});
}
