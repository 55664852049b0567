// Recovery, as elastic training needs it: after a rank dies mid-collective,
// the survivors (in the same processes) build a new communicator without it
// and every collective is exact on it. Two ways: ncclCommShrink with
// NCCL_SHRINK_ABORT on the failed communicator, and ncclCommAbort followed by
// a fresh init with a new unique id (what torchrun's restart does within a
// process). Afterwards the processes hold what they held before the first init.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "fault_row.h"

namespace {

using namespace gyre::test;

constexpr int kRanks = 4;
constexpr int kVictim = 2;
constexpr size_t kCount = 1000;  // per rank where a call splits its buffer

// Runs AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll and a
// Send/Recv ring on `comm` with exact int64 values; "" or what was wrong.
std::string checkEveryCollective(ncclComm_t comm) {
  int rank = -1, n = 0;
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n);
  auto value = [](int r, size_t i) { return int64_t(r + 1) * 1000003 + int64_t(i); };
  std::vector<int64_t> in(kCount * n), out(kCount * n);
  for (size_t i = 0; i < in.size(); ++i) in[i] = value(rank, i);
  auto err = [&](const char* what) { return std::string(what) + ": " + lastError(); };
  auto wrong = [&](const char* what, size_t i, int64_t got, int64_t want) {
    return std::string(what) + " [" + std::to_string(i) + "] = " + std::to_string(got) + ", want " +
           std::to_string(want);
  };
  auto sumAt = [&](size_t i) {
    int64_t s = 0;
    for (int r = 0; r < n; ++r) s += value(r, i);
    return s;
  };

  if (ncclAllReduce(in.data(), out.data(), kCount, ncclInt64, ncclSum, comm, nullptr) != ncclSuccess) return err("AllReduce");
  for (size_t i = 0; i < kCount; ++i) if (out[i] != sumAt(i)) return wrong("AllReduce", i, out[i], sumAt(i));

  const int root = n - 1;
  if (ncclBroadcast(in.data(), out.data(), kCount, ncclInt64, root, comm, nullptr) != ncclSuccess) return err("Broadcast");
  for (size_t i = 0; i < kCount; ++i) if (out[i] != value(root, i)) return wrong("Broadcast", i, out[i], value(root, i));

  if (ncclReduce(in.data(), out.data(), kCount, ncclInt64, ncclSum, 0, comm, nullptr) != ncclSuccess) return err("Reduce");
  if (rank == 0)
    for (size_t i = 0; i < kCount; ++i) if (out[i] != sumAt(i)) return wrong("Reduce", i, out[i], sumAt(i));

  if (ncclAllGather(in.data(), out.data(), kCount, ncclInt64, comm, nullptr) != ncclSuccess) return err("AllGather");
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < kCount; ++i)
      if (out[r * kCount + i] != value(r, i)) return wrong("AllGather", r * kCount + i, out[r * kCount + i], value(r, i));

  if (ncclReduceScatter(in.data(), out.data(), kCount, ncclInt64, ncclSum, comm, nullptr) != ncclSuccess)
    return err("ReduceScatter");
  for (size_t i = 0; i < kCount; ++i)
    if (out[i] != sumAt(rank * kCount + i)) return wrong("ReduceScatter", i, out[i], sumAt(rank * kCount + i));

  // AlltoAll: block b of rank r goes to rank b; rank r's block q holds value(q, r*kCount+i).
  if (ncclAlltoAll(in.data(), out.data(), kCount, ncclInt64, comm, nullptr) != ncclSuccess) return err("AlltoAll");
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < kCount; ++i)
      if (out[q * kCount + i] != value(q, rank * kCount + i))
        return wrong("AlltoAll", q * kCount + i, out[q * kCount + i], value(q, rank * kCount + i));

  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  ncclGroupStart();
  ncclSend(in.data(), kCount, ncclInt64, next, comm, nullptr);
  ncclRecv(out.data(), kCount, ncclInt64, prev, comm, nullptr);
  if (ncclGroupEnd() != ncclSuccess) return err("Send/Recv");
  for (size_t i = 0; i < kCount; ++i) if (out[i] != value(prev, i)) return wrong("Send/Recv", i, out[i], value(prev, i));
  return "";
}

enum class Rebuild { kShrink, kFreshInit };

void expectRecovery(Rebuild how, const char* row) {
  RankOptions o;
  o.timeout_s = 60;
  o.idCount = 2;  // the first communicator's id, and the survivors' new one
  o.killRank = kVictim;
  o.killDelay_s = 0.1;
  o.env = {{"GYRE_TIMEOUT", "5"}, {"GYRE_INIT_TIMEOUT", "10"}};
  const int shm = gyreShmSegments();
  RunResult result = runRanks(
      kRanks,
      [how](int rank, int n, const ncclUniqueId&) {
        const Baseline b = takeBaseline();
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, rankIds()[0], rank, nullptr) == ncclSuccess, "init: %s",
                   lastError().c_str());
        std::string why = checkEveryCollective(comm);
        RANK_CHECK(why.empty(), "rank %d before the fault: %s", rank, why.c_str());
        if (rank == kVictim) {
          rankRecord("t_fault", std::to_string(monotonicSeconds() + 0.1));
          rankMark();
        }
        std::vector<float> big(1 << 18, 1.f);
        ncclResult_t r;
        const double until = monotonicSeconds() + 20;
        do r = ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat32, ncclSum, comm, nullptr);
        while (r == ncclSuccess && monotonicSeconds() < until);
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "rank %d: no failure with rank %d dead", rank, kVictim);

        ncclComm_t next = nullptr;
        const int newRank = rank < kVictim ? rank : rank - 1;
        if (how == Rebuild::kShrink) {
          int dead[] = {kVictim};
          r = ncclCommShrink(comm, dead, 1, &next, nullptr, NCCL_SHRINK_ABORT);
          RANK_CHECK(r == ncclSuccess, "rank %d: ncclCommShrink: %s", rank, lastError().c_str());
          RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort of the old communicator: %s", lastError().c_str());
        } else {
          RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort: %s", lastError().c_str());
          r = gyreCommInitRankHost(&next, n - 1, rankIds()[1], newRank, nullptr);
          RANK_CHECK(r == ncclSuccess, "rank %d: fresh init as rank %d of %d: %s", rank, newRank, n - 1,
                     lastError().c_str());
        }
        int got = -1, count = 0;
        ncclCommUserRank(next, &got);
        ncclCommCount(next, &count);
        RANK_CHECK(got == newRank && count == n - 1, "rank %d: new communicator says rank %d of %d", rank, got, count);
        why = checkEveryCollective(next);
        std::string saw = "\"";
        saw += msg.substr(0, 70);
        saw += "...\", then every collective ";
        saw += why.empty() ? "exact" : "WRONG";
        saw += " on " + std::to_string(count) + " ranks";
        rankRecord("saw", saw);
        RANK_CHECK(why.empty(), "rank %d (now %d) after recovery: %s", rank, newRank, why.c_str());
        RANK_CHECK(ncclCommDestroy(next) == ncclSuccess, "destroy: %s", lastError().c_str());
        const std::string left = recordLeftovers(b);
        RANK_CHECK(left.empty(), "rank %d: after both communicators: %s", rank, left.c_str());
        return 0;
      },
      o);
  printRow(row, result, shm);
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace

TEST_CASE("after rank 2 of 4 dies, the survivors shrink (NCCL_SHRINK_ABORT) and every collective is exact on 3",
          "[faults][recovery]") {
  expectRecovery(Rebuild::kShrink, "recovery: ncclCommShrink after SIGKILL");
}

TEST_CASE("after rank 2 of 4 dies, the survivors abort, init with a new id and every collective is exact on 3",
          "[faults][recovery]") {
  expectRecovery(Rebuild::kFreshInit, "recovery: abort + fresh init (new id) after SIGKILL");
}
