// Communicators made from other communicators: ncclCommSplit (color groups ranks, key
// orders them with ties broken by the old rank, NCCL_SPLIT_NOCOLOR gives NULL) with
// collectives on the new communicators checked against the reference over just their
// members, and gyreCommInitAllHost, where one thread drives every rank's communicator
// inside ncclGroupStart/ncclGroupEnd.
#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

// ---- ncclCommSplit ----------------------------------------------------------------------

// What every rank of the parent asks for, and what it should get.
struct SplitPlan {
  std::vector<int> color, key;  // by old rank
  // The old ranks of `oldRank`'s new communicator in new-rank order (empty for NOCOLOR).
  std::vector<int> membersOf(int oldRank) const {
    std::vector<int> m;
    if (color[size_t(oldRank)] == NCCL_SPLIT_NOCOLOR) return m;
    for (size_t r = 0; r < color.size(); ++r)
      if (color[r] == color[size_t(oldRank)]) m.push_back(int(r));
    std::stable_sort(m.begin(), m.end(), [&](int a, int b) { return key[size_t(a)] < key[size_t(b)]; });
    return m;
  }
};

// Runs an allreduce, a broadcast from new rank 0 and an allgather on `sub`, whose members
// are the old ranks `members`; inputs are seeded by old rank, so each member checks the
// result against the reference over exactly the members, in their new order.
bool checkSubComm(ncclComm_t sub, int oldRank, const std::vector<int>& members, const std::string& label) {
  const int n = int(members.size());
  const int newRank = int(std::find(members.begin(), members.end(), oldRank) - members.begin());
  int count = -1, user = -1;
  if (!callOk(ncclCommCount(sub, &count), oldRank, label, "ncclCommCount") ||
      !callOk(ncclCommUserRank(sub, &user), oldRank, label, "ncclCommUserRank"))
    return false;
  if (count != n || user != newRank) {
    caseFail("old rank %d: %s: new communicator has %d ranks and this rank is %d; expected %d ranks, rank %d", oldRank,
             label.c_str(), count, user, n, newRank);
    return true;
  }
  std::string members_text;
  for (int m : members) members_text.append(" ").append(std::to_string(m));
  const std::string what = label + " (old ranks in new order:" + members_text + ")";
  for (ncclDataType_t type : {ncclFloat32, ncclInt64}) {
    const TypeInfo& t = typeInfo(type);
    const size_t elems = 301;
    const uint64_t id = caseId(0x5B, {uint64_t(type), uint64_t(members.size()), uint64_t(members[0])});
    std::vector<std::vector<char>> byOld(members.size());
    std::vector<const void*> ptrs;
    for (size_t i = 0; i < members.size(); ++i) {
      byOld[i].resize(elems * t.size);
      fillRankInput(type, ncclSum, n, id, members[i], byOld[i].data(), elems);
      ptrs.push_back(byOld[i].data());
    }
    const char* mine = byOld[size_t(newRank)].data();
    std::vector<char> out(elems * t.size);
    rankProgress(what + " allreduce");
    if (!callOk(ncclAllReduce(mine, out.data(), elems, type, ncclSum, sub, nullptr), oldRank, what, "ncclAllReduce"))
      return false;
    std::string wrong = compareToReference(t, ncclSum, ptrs, out.data(), elems);
    if (!wrong.empty()) caseFail("old rank %d: %s: %s allreduce: %s", oldRank, what.c_str(), t.name, wrong.c_str());
    rankRecord(what + " " + t.name + " allreduce", hexHash(out.data(), out.size()));

    rankProgress(what + " broadcast");
    if (!callOk(ncclBroadcast(mine, out.data(), elems, type, 0, sub, nullptr), oldRank, what, "ncclBroadcast"))
      return false;
    wrong = compareExact(t, out.data(), byOld[0].data(), elems);
    if (!wrong.empty())
      caseFail("old rank %d: %s: %s broadcast from new rank 0 (old rank %d): %s", oldRank, what.c_str(), t.name,
               members[0], wrong.c_str());

    std::vector<char> all(elems * t.size * size_t(n)), want;
    for (const auto& b : byOld) want.insert(want.end(), b.begin(), b.end());
    rankProgress(what + " allgather");
    if (!callOk(ncclAllGather(mine, all.data(), elems, type, sub, nullptr), oldRank, what, "ncclAllGather"))
      return false;
    wrong = compareExact(t, all.data(), want.data(), elems * size_t(n));
    if (!wrong.empty())
      caseFail("old rank %d: %s: %s allgather blocks are not in key order: %s", oldRank, what.c_str(), t.name,
               wrong.c_str());
  }
  return true;
}

// The parent is still usable, between and after the children's calls.
bool checkParent(ncclComm_t comm, int rank, int nranks, const std::string& label) {
  const uint64_t id = caseId(0x5C, {uint64_t(nranks)});
  const Inputs in = makeInputs(typeInfo(ncclInt32), ncclSum, nranks, id, 97);
  std::vector<int32_t> out(97);
  if (!callOk(ncclAllReduce(in.rank(rank), out.data(), 97, ncclInt32, ncclSum, comm, nullptr), rank, label,
              "ncclAllReduce on the parent"))
    return false;
  std::string wrong = compareToReference(typeInfo(ncclInt32), ncclSum, in.at(0, 4), out.data(), 97);
  if (!wrong.empty()) caseFail("rank %d: %s: parent allreduce: %s", rank, label.c_str(), wrong.c_str());
  return true;
}

int runSplit(ncclComm_t comm, int rank, int nranks, const SplitPlan& plan, const std::string& label) {
  ncclComm_t sub = nullptr;
  rankProgress(label + ": ncclCommSplit");
  ncclResult_t r = ncclCommSplit(comm, plan.color[size_t(rank)], plan.key[size_t(rank)], &sub, nullptr);
  if (!callOk(r, rank, label, "ncclCommSplit")) return 1;
  const std::vector<int> members = plan.membersOf(rank);
  if (members.empty()) {
    RANK_CHECK(sub == nullptr, "rank %d: %s: NCCL_SPLIT_NOCOLOR gave a communicator, not NULL", rank, label.c_str());
  } else {
    RANK_CHECK(sub != nullptr, "rank %d: %s: ncclCommSplit gave NULL for color %d", rank, label.c_str(),
               plan.color[size_t(rank)]);
    int isHost = -1;
    const int parentIsHost = testDeviceComms() ? 0 : 1;  // a split keeps its parent's kind
    RANK_CHECK(gyreCommIsHost(sub, &isHost) == ncclSuccess && isHost == parentIsHost,
               "rank %d: %s: a split of a %s communicator is not one (%d)", rank, label.c_str(),
               parentIsHost ? "host" : "device", isHost);
    if (!checkSubComm(sub, rank, members, label)) return 1;
  }
  if (!checkParent(comm, rank, nranks, label)) return 1;
  if (sub) {
    if (!checkSubComm(sub, rank, members, label + ", again after a parent call")) return 1;
    RANK_CHECK(ncclCommDestroy(sub) == ncclSuccess, "rank %d: %s: ncclCommDestroy of the new communicator: %s", rank,
               label.c_str(), lastError().c_str());
  }
  return 0;
}

RunResult runSplits(int nranks, const std::vector<std::pair<std::string, SplitPlan>>& plans) {
  RunConfig config;
  config.nranks = nranks;
  return runOnComm(config, [&](int rank, int n, ncclComm_t comm) {
    for (const auto& [label, plan] : plans)
      if (runSplit(comm, rank, n, plan, label) != 0) return 1;
    return 0;
  });
}

// ---- gyreCommInitAllHost ----------------------------------------------------------------

// One thread, `n` communicators: a group per collective with one call per communicator.
int runInitAll(int n) {
  std::vector<ncclComm_t> comms(size_t(n), nullptr);
  const std::string label = "gyreCommInitAllHost(" + std::to_string(n) + ")";
  ncclResult_t r = gyreCommInitAllHost(comms.data(), n);
  RANK_CHECK(r == ncclSuccess, "%s returned %d: %s", label.c_str(), int(r), lastError().c_str());
  for (int i = 0; i < n; ++i) {
    int count = -1, user = -1, isHost = -1;
    RANK_CHECK(ncclCommCount(comms[size_t(i)], &count) == ncclSuccess && count == n, "%s: comm %d has %d ranks",
               label.c_str(), i, count);
    RANK_CHECK(ncclCommUserRank(comms[size_t(i)], &user) == ncclSuccess && user == i, "%s: comm %d is rank %d",
               label.c_str(), i, user);
    RANK_CHECK(gyreCommIsHost(comms[size_t(i)], &isHost) == ncclSuccess && isHost == 1,
               "%s: comm %d is not a host communicator", label.c_str(), i);
  }
  auto group = [&](const std::string& what, const std::function<ncclResult_t(int)>& call) {
    rankProgress(label + ": " + what);
    ncclResult_t res = ncclGroupStart();
    for (int i = 0; i < n && res == ncclSuccess; ++i) res = call(i);
    ncclResult_t end = ncclGroupEnd();
    return callOk(res, 0, label, (what + " call").c_str()) && callOk(end, 0, label, (what + " ncclGroupEnd").c_str());
  };

  for (ncclDataType_t type : {ncclFloat64, ncclBfloat16, ncclUint8}) {
    const TypeInfo& t = typeInfo(type);
    for (size_t count : {size_t(1), size_t(13), size_t(5000)}) {
      const std::string what = caseName("collectives", type, "sum", count, -1, false, uint64_t(n)) + " on " + label;
      const uint64_t id = caseId(0x1A, {uint64_t(type), count, uint64_t(n)});
      const Inputs in = makeInputs(t, ncclSum, n, id, count * size_t(n));
      const size_t bytes = count * t.size;
      std::vector<std::vector<char>> out(size_t(n), std::vector<char>(bytes * size_t(n)));

      if (!group("allreduce", [&](int i) {
            return ncclAllReduce(in.rank(i), out[size_t(i)].data(), count, type, ncclSum, comms[size_t(i)], nullptr);
          }))
        return 1;
      for (int i = 0; i < n; ++i) {
        std::string wrong = compareToReference(t, ncclSum, in.at(0, t.size), out[size_t(i)].data(), count);
        if (!wrong.empty()) caseFail("%s: allreduce on comm %d: %s", what.c_str(), i, wrong.c_str());
        if (memcmp(out[size_t(i)].data(), out[0].data(), bytes) != 0)
          caseFail("%s: allreduce on comm %d differs bitwise from comm 0", what.c_str(), i);
      }

      const int root = n - 1;
      if (!group("broadcast", [&](int i) {
            return ncclBroadcast(in.rank(i), out[size_t(i)].data(), count, type, root, comms[size_t(i)], nullptr);
          }))
        return 1;
      for (int i = 0; i < n; ++i) {
        std::string wrong = compareExact(t, out[size_t(i)].data(), in.rank(root), count);
        if (!wrong.empty()) caseFail("%s: broadcast from %d on comm %d: %s", what.c_str(), root, i, wrong.c_str());
      }

      if (!group("allgather", [&](int i) {
            return ncclAllGather(in.rank(i), out[size_t(i)].data(), count, type, comms[size_t(i)], nullptr);
          }))
        return 1;
      for (int i = 0; i < n; ++i)
        for (int p = 0; p < n; ++p) {
          std::string wrong = compareExact(t, out[size_t(i)].data() + size_t(p) * bytes, in.rank(p), count);
          if (!wrong.empty()) caseFail("%s: allgather block %d on comm %d: %s", what.c_str(), p, i, wrong.c_str());
        }

      if (!group("reducescatter", [&](int i) {
            return ncclReduceScatter(in.rank(i), out[size_t(i)].data(), count, type, ncclSum, comms[size_t(i)],
                                     nullptr);
          }))
        return 1;
      for (int i = 0; i < n; ++i) {
        std::string wrong =
            compareToReference(t, ncclSum, in.at(size_t(i) * count, t.size), out[size_t(i)].data(), count);
        if (!wrong.empty()) caseFail("%s: reducescatter on comm %d: %s", what.c_str(), i, wrong.c_str());
      }

      // Two calls per communicator in one group run in call order: a reduce to rank 0,
      // then a broadcast of its result from rank 0 in place.
      if (!group("reduce then broadcast", [&](int i) {
            ncclResult_t res = ncclReduce(in.rank(i), out[size_t(i)].data(), count, type, ncclSum, 0,
                                          comms[size_t(i)], nullptr);
            return res != ncclSuccess ? res
                                      : ncclBcast(out[size_t(i)].data(), count, type, 0, comms[size_t(i)], nullptr);
          }))
        return 1;
      for (int i = 0; i < n; ++i) {
        std::string wrong = compareToReference(t, ncclSum, in.at(0, t.size), out[size_t(i)].data(), count);
        if (!wrong.empty()) caseFail("%s: reduce then broadcast, comm %d: %s", what.c_str(), i, wrong.c_str());
      }

      // Sends around the ring and an ncclAlltoAll (itself a group) nested in the group.
      if (!group("ring send/recv", [&](int i) {
            ncclResult_t res = ncclSend(in.rank(i), count, type, (i + 1) % n, comms[size_t(i)], nullptr);
            return res != ncclSuccess ? res
                                      : ncclRecv(out[size_t(i)].data(), count, type, (i + n - 1) % n,
                                                 comms[size_t(i)], nullptr);
          }))
        return 1;
      for (int i = 0; i < n; ++i) {
        std::string wrong = compareExact(t, out[size_t(i)].data(), in.rank((i + n - 1) % n), count);
        if (!wrong.empty()) caseFail("%s: ring send/recv into comm %d: %s", what.c_str(), i, wrong.c_str());
      }
      if (!group("alltoall", [&](int i) {
            return ncclAlltoAll(in.rank(i), out[size_t(i)].data(), count, type, comms[size_t(i)], nullptr);
          }))
        return 1;
      for (int i = 0; i < n; ++i)
        for (int p = 0; p < n; ++p) {
          std::string wrong =
              compareExact(t, out[size_t(i)].data() + size_t(p) * bytes, in.rank(p) + size_t(i) * bytes, count);
          if (!wrong.empty()) caseFail("%s: alltoall block %d on comm %d: %s", what.c_str(), p, i, wrong.c_str());
        }
    }
  }
  for (int i = 0; i < n; ++i)
    RANK_CHECK(ncclCommDestroy(comms[size_t(i)]) == ncclSuccess, "%s: ncclCommDestroy(comm %d): %s", label.c_str(),
               i, lastError().c_str());
  return rankFailureCount() == 0 ? 0 : 1;
}

}  // namespace

TEST_CASE("comm split by parity over 4 ranks orders each half by key and reduces over its members only",
          "[split]") {
  SplitPlan parity{{0, 1, 0, 1}, {0, 0, -2, -3}};  // keys reverse each half: new rank 0 is old 2 and old 3
  SplitPlan ties{{7, 7, 7, 7}, {1, 0, 1, 0}};      // equal keys keep the old order: 1, 3, 0, 2
  RunResult result = runSplits(4, {{"split by parity with reversed keys", parity}, {"split with tied keys", ties}});
  INFO(result.describe());
  CHECK(result.allOk());
  const std::string disagreements = recordDisagreements(result);
  INFO("allreduce results that differ between members of one new communicator:\n" << disagreements);
  CHECK(disagreements.empty());
}

TEST_CASE("comm split with NCCL_SPLIT_NOCOLOR gives that rank NULL and the others a working communicator",
          "[split]") {
  SplitPlan three{{0, NCCL_SPLIT_NOCOLOR, 0, 0}, {5, 0, 5, 1}};  // new order: 3, 0, 2
  SplitPlan one{{NCCL_SPLIT_NOCOLOR, 4, NCCL_SPLIT_NOCOLOR, NCCL_SPLIT_NOCOLOR}, {0, 0, 0, 0}};
  RunResult result = runSplits(4, {{"split leaving out old rank 1", three}, {"split keeping only old rank 1", one}});
  INFO(result.describe());
  CHECK(result.allOk());
  const std::string disagreements = recordDisagreements(result);
  INFO("allreduce results that differ between members of one new communicator:\n" << disagreements);
  CHECK(disagreements.empty());
}

TEST_CASE("comm split of 3 ranks into singletons and pairs gives communicators of 1 and 2 ranks", "[split]") {
  SplitPlan singles{{0, 1, 2}, {0, 0, 0}};
  SplitPlan pair{{3, 9, 3}, {1, 0, 0}};  // old ranks 2, 0 and old rank 1 alone
  RunResult result = runSplits(3, {{"split into singletons", singles}, {"split into a pair and a singleton", pair}});
  INFO(result.describe());
  CHECK(result.allOk());
  const std::string disagreements = recordDisagreements(result);
  INFO("allreduce results that differ between members of one new communicator:\n" << disagreements);
  CHECK(disagreements.empty());
}

TEST_CASE("one thread drives every communicator of gyreCommInitAllHost through grouped collectives",
          "[initall]") {
  for (int n = 1; n <= 4; ++n) {
    RankOptions options;
    options.idMode = IdMode::kNone;
    options.timeout_s = 45;
    options.env = {{"GYRE_TIMEOUT", "10"}, {"NCCL_ALGO", std::nullopt}, {"NCCL_BUFFSIZE", "65536"}};
    RunResult result = runRanks(1, [n](int, int, const ncclUniqueId&) { return runInitAll(n); }, options);
    INFO(n << " communicators in one process, NCCL_BUFFSIZE=65536: " << result.elapsed_s << " s");
    INFO(result.describe());
    CHECK(result.allOk());
  }
}
