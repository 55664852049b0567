// Point-to-point and the collectives built from it, on host communicators:
// ncclSend/ncclRecv inside ncclGroupStart/ncclGroupEnd (rings, nested groups, several
// messages to one peer, sends to self, zero counts) and an all-to-all written as one
// group of sends and receives whose messages are many times NCCL_BUFFSIZE, which only
// completes if every send and receive of the group progresses at once; then
// ncclAlltoAll, ncclGather and ncclScatter over every datatype, root, placement and a
// range of counts. Every message's bytes are seeded by (case, sender, receiver), so the
// receiver checks them exactly.
#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

// The bytes `src` sends to `dst` in case `id`.
std::vector<char> message(ncclDataType_t type, uint64_t id, int src, int dst, size_t count) {
  std::vector<char> m(count * typeInfo(type).size);
  fillRankInput(type, ncclSum, 1, caseId(0x5E4D, {id, uint64_t(src), uint64_t(dst)}), 0, m.data(), count);
  return m;
}

bool checkMessage(int rank, int nranks, const std::string& what, ncclDataType_t type, uint64_t id, int src, int dst,
                  const void* got, size_t count) {
  const std::vector<char> want = message(type, id, src, dst, count);
  std::string wrong = compareExact(typeInfo(type), got, want.data(), count);
  if (wrong.empty()) return true;
  caseFail("rank %d of %d: %s: message from rank %d to rank %d: %s", rank, nranks, what.c_str(), src, dst,
           wrong.c_str());
  return false;
}

bool groupOk(ncclResult_t start, ncclResult_t body, ncclResult_t end, int rank, const std::string& what) {
  return callOk(start, rank, what, "ncclGroupStart") && callOk(body, rank, what, "ncclSend/ncclRecv") &&
         callOk(end, rank, what, "ncclGroupEnd");
}

// ---- Send/receive patterns --------------------------------------------------------------

// Each rank sends to rank+1 and receives from rank-1, one group per type and count.
bool runRingShift(ncclComm_t comm, int rank, int nranks) {
  for (ncclDataType_t type : allTypes())
    for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(127), size_t(1021)}) {
      const uint64_t id = caseId(0x51, {uint64_t(type), count});
      const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
      const std::string what = caseName("ring shift send/recv", type, nullptr, count, -1, false, id);
      const std::vector<char> out = message(type, id, rank, next, count);
      Region in(out.size());
      rankProgress(what);
      ncclResult_t s = ncclGroupStart(), body = ncclSuccess;
      // Odd ranks post the receive first, so both orders occur in one group.
      if (rank % 2) body = ncclRecv(in.data(), count, type, prev, comm, nullptr);
      if (body == ncclSuccess) body = ncclSend(out.data(), count, type, next, comm, nullptr);
      if (body == ncclSuccess && rank % 2 == 0) body = ncclRecv(in.data(), count, type, prev, comm, nullptr);
      if (!groupOk(s, body, ncclGroupEnd(), rank, what)) return false;
      checkMessage(rank, nranks, what, type, id, prev, rank, in.data(), count);
      std::string damage = in.guardDamage();
      if (!damage.empty()) caseFail("rank %d of %d: %s: recvbuff %s", rank, nranks, what.c_str(), damage.c_str());
    }
  return true;
}

// Every rank sends `count` elements to every rank (itself included) and receives from
// every rank, in one group, starting with a different peer on each rank. With messages
// many times NCCL_BUFFSIZE no send can finish before its receiver drains it, so this
// deadlocks unless the group's operations all progress together (a deadlock ends at
// GYRE_TIMEOUT with an error, so the test fails rather than hangs).
bool runGroupAllToAll(ncclComm_t comm, int rank, int nranks, ncclDataType_t type, size_t count, bool recvsFirst,
                      bool nested) {
  const TypeInfo& t = typeInfo(type);
  const uint64_t id = caseId(0xA2A, {uint64_t(type), count, recvsFirst, nested});
  char extra[96];
  snprintf(extra, sizeof extra, " (%s first%s, %zu bytes per message)", recvsFirst ? "receives" : "sends",
           nested ? ", nested groups" : "", count * t.size);
  const std::string what = caseName("all-to-all as grouped send/recv", type, nullptr, count, -1, false, id, extra);
  std::vector<std::vector<char>> out(static_cast<size_t>(nranks));
  std::vector<Region> in;
  in.reserve(size_t(nranks));
  for (int p = 0; p < nranks; ++p) {
    out[size_t(p)] = message(type, id, rank, p, count);
    in.emplace_back(count * t.size);
  }
  rankProgress(what);
  ncclResult_t r = ncclGroupStart();
  auto post = [&](bool send) {
    if (nested && r == ncclSuccess) r = ncclGroupStart();
    for (int k = 0; k < nranks && r == ncclSuccess; ++k) {
      const int p = (rank + k + 1) % nranks;
      r = send ? ncclSend(out[size_t(p)].data(), count, type, p, comm, nullptr)
               : ncclRecv(in[size_t(p)].data(), count, type, p, comm, nullptr);
    }
    if (nested && r == ncclSuccess) r = ncclGroupEnd();
  };
  post(!recvsFirst);
  post(recvsFirst);
  if (!groupOk(ncclSuccess, r, ncclGroupEnd(), rank, what)) return false;
  for (int p = 0; p < nranks; ++p) {
    checkMessage(rank, nranks, what, type, id, p, rank, in[size_t(p)].data(), count);
    std::string damage = in[size_t(p)].guardDamage();
    if (!damage.empty())
      caseFail("rank %d of %d: %s: recvbuff from rank %d %s", rank, nranks, what.c_str(), p, damage.c_str());
  }
  return true;
}

// Three messages of different types and sizes to the same peer in one group arrive in
// the order they were posted; a send and receive to self is a copy.
bool runOrderedMessages(ncclComm_t comm, int rank, int nranks) {
  const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
  const uint64_t id = caseId(0x0D, {uint64_t(nranks)});
  const std::string what = "three messages to one peer and one to self in a group (case " + std::to_string(id) + ")";
  struct Msg {
    ncclDataType_t type;
    size_t count;
  };
  const Msg msgs[3] = {{ncclFloat64, 300}, {ncclInt8, 7}, {ncclBfloat16, 5000}};
  std::vector<std::vector<char>> out;
  std::vector<Region> in;
  in.reserve(4);
  for (int i = 0; i < 3; ++i) {
    out.push_back(message(msgs[i].type, id + uint64_t(i), rank, next, msgs[i].count));
    in.emplace_back(out.back().size());
  }
  const std::vector<char> self = message(ncclUint32, id + 7, rank, rank, 333);
  in.emplace_back(self.size());
  rankProgress(what);
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; i < 3 && r == ncclSuccess; ++i)
    r = ncclSend(out[size_t(i)].data(), msgs[i].count, msgs[i].type, next, comm, nullptr);
  for (int i = 0; i < 3 && r == ncclSuccess; ++i)
    r = ncclRecv(in[size_t(i)].data(), msgs[i].count, msgs[i].type, prev, comm, nullptr);
  // Posted after the others so that on 1 rank, where every peer is self, the sends and
  // receives to self still pair up in order.
  if (r == ncclSuccess) r = ncclRecv(in[3].data(), 333, ncclUint32, rank, comm, nullptr);
  if (r == ncclSuccess) r = ncclSend(self.data(), 333, ncclUint32, rank, comm, nullptr);
  if (!groupOk(ncclSuccess, r, ncclGroupEnd(), rank, what)) return false;
  for (int i = 0; i < 3; ++i)
    checkMessage(rank, nranks, what, msgs[i].type, id + uint64_t(i), prev, rank, in[size_t(i)].data(), msgs[i].count);
  checkMessage(rank, nranks, what, ncclUint32, id + 7, rank, rank, in[3].data(), 333);
  return true;
}

// A blocking ncclSend outside any group, paired with a blocking ncclRecv on the peer
// (ranks 2k and 2k+1; an odd last rank sits this one out).
bool runUngroupedPairs(ncclComm_t comm, int rank, int nranks, size_t count) {
  const uint64_t id = caseId(0x9A, {count});
  const std::string what =
      caseName("ungrouped send/recv between rank pairs", ncclFloat32, nullptr, count, -1, false, id);
  const int peer = rank ^ 1;
  rankProgress(what);
  if (peer >= nranks) return true;
  const std::vector<char> out = message(ncclFloat32, id, rank, peer, count);
  Region in(out.size());
  for (int turn = 0; turn < 2; ++turn) {
    const bool sending = (turn == 0) == (rank % 2 == 0);
    ncclResult_t r = sending ? ncclSend(out.data(), count, ncclFloat32, peer, comm, nullptr)
                             : ncclRecv(in.data(), count, ncclFloat32, peer, comm, nullptr);
    if (!callOk(r, rank, what, sending ? "ncclSend" : "ncclRecv")) return false;
  }
  checkMessage(rank, nranks, what, ncclFloat32, id, peer, rank, in.data(), count);
  return true;
}

// ---- AlltoAll, Gather, Scatter ----------------------------------------------------------

enum class Coll { kAlltoAll, kGather, kScatter };

struct Case {
  uint64_t id;
  Coll coll;
  ncclDataType_t type;
  size_t count;  // per rank
  int root;
  bool inPlace;
  bool nullOffRoot;  // non-root ranks pass NULL for the buffer the call ignores there
};

std::string describe(const Case& c) {
  const char* name = c.coll == Coll::kAlltoAll ? "alltoall" : c.coll == Coll::kGather ? "gather" : "scatter";
  return caseName(name, c.type, nullptr, c.count, c.coll == Coll::kAlltoAll ? -1 : c.root, c.inPlace, c.id,
                  c.nullOffRoot ? " (NULL off-root buffer)" : "");
}

std::vector<Case> buildCases(int nranks, size_t buffSize) {
  std::vector<Case> cases;
  size_t k = 0;
  auto add = [&](Coll coll, ncclDataType_t t, size_t count, bool inPlace) {
    cases.push_back({caseId(0x6A, {uint64_t(coll), uint64_t(t), count, inPlace, k}), coll, t, count,
                     int(k % size_t(nranks)), inPlace, !inPlace && k % 4 == 1});
    ++k;
  };
  if (buffSize == kDefaultBuffSize) {
    for (ncclDataType_t t : allTypes())
      for (size_t count : smallCounts()) {
        add(Coll::kAlltoAll, t, count, false);
        for (bool inPlace : {false, true}) {
          add(Coll::kGather, t, count, inPlace);
          add(Coll::kScatter, t, count, inPlace);
        }
      }
  } else {
    for (ncclDataType_t t : {ncclInt8, ncclFloat16, ncclFloat32, ncclUint64}) {
      const size_t count = countSpanningChunks(typeInfo(t), buffSize, 3.5);
      add(Coll::kAlltoAll, t, count, false);
      add(Coll::kGather, t, count, t == ncclFloat16);
      add(Coll::kScatter, t, count, t == ncclInt8);
    }
  }
  return cases;
}

bool runAlltoAll(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t block = c.count * t.size;
  const std::string what = describe(c);
  Region send(block * size_t(nranks)), recv(block * size_t(nranks));
  for (int p = 0; p < nranks; ++p) {
    const std::vector<char> m = message(c.type, c.id, rank, p, c.count);
    if (block) memcpy(send.data() + size_t(p) * block, m.data(), block);
  }
  std::vector<unsigned char> sent(send.data(), send.data() + send.bytes());
  rankProgress(what);
  if (!callOk(ncclAlltoAll(send.data(), recv.data(), c.count, c.type, comm, nullptr), rank, what, "ncclAlltoAll"))
    return false;
  for (int p = 0; p < nranks; ++p)
    checkMessage(rank, nranks, what, c.type, c.id, p, rank, recv.data() + size_t(p) * block, c.count);
  std::string damage = recv.guardDamage();
  if (!damage.empty()) caseFail("rank %d of %d: %s: recvbuff %s", rank, nranks, what.c_str(), damage.c_str());
  if (!sent.empty() && memcmp(sent.data(), send.data(), sent.size()) != 0)
    caseFail("rank %d of %d: %s: sendbuff was modified", rank, nranks, what.c_str());
  return true;
}

// Gather: the root's block p is rank p's input. In place at the root, its own input
// already sits in its block (sendbuff == recvbuff + root*count).
bool runGather(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t block = c.count * t.size;
  const std::string what = describe(c);
  const bool isRoot = rank == c.root;
  const std::vector<char> mine = message(c.type, c.id, rank, c.root, c.count);
  Region send(block), recv(block * size_t(nranks));
  if (block) memcpy(send.data(), mine.data(), block);
  const void* sendPtr = send.data();
  if (c.inPlace && isRoot) {
    if (block) memcpy(recv.data() + size_t(rank) * block, mine.data(), block);
    sendPtr = recv.data() + size_t(rank) * block;
  }
  void* recvPtr = !isRoot && c.nullOffRoot ? nullptr : recv.data();
  rankProgress(what);
  if (!callOk(ncclGather(sendPtr, recvPtr, c.count, c.type, c.root, comm, nullptr), rank, what, "ncclGather"))
    return false;
  if (isRoot) {
    for (int p = 0; p < nranks; ++p)
      checkMessage(rank, nranks, what, c.type, c.id, p, c.root, recv.data() + size_t(p) * block, c.count);
  } else {
    std::vector<unsigned char> untouched(recv.bytes(), kUnwrittenByte);
    if (recv.bytes() && memcmp(recv.data(), untouched.data(), recv.bytes()) != 0)
      caseFail("rank %d of %d: %s: a non-root recvbuff was written", rank, nranks, what.c_str());
  }
  std::string damage = recv.guardDamage();
  if (!damage.empty()) caseFail("rank %d of %d: %s: recvbuff %s", rank, nranks, what.c_str(), damage.c_str());
  if (block && memcmp(send.data(), mine.data(), block) != 0)
    caseFail("rank %d of %d: %s: sendbuff was modified", rank, nranks, what.c_str());
  return true;
}

// Scatter: rank p receives the root's block p. In place at the root, its own block
// stays where it is (recvbuff == sendbuff + root*count).
bool runScatter(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t block = c.count * t.size;
  const std::string what = describe(c);
  const bool isRoot = rank == c.root;
  Region send(block * size_t(nranks)), recv(block);
  if (isRoot)
    for (int p = 0; p < nranks; ++p) {
      const std::vector<char> m = message(c.type, c.id, c.root, p, c.count);
      if (block) memcpy(send.data() + size_t(p) * block, m.data(), block);
    }
  std::vector<unsigned char> sent(send.data(), send.data() + send.bytes());
  const void* sendPtr = !isRoot && c.nullOffRoot ? nullptr : send.data();
  unsigned char* out = c.inPlace && isRoot ? send.data() + size_t(rank) * block : recv.data();
  rankProgress(what);
  if (!callOk(ncclScatter(sendPtr, out, c.count, c.type, c.root, comm, nullptr), rank, what, "ncclScatter"))
    return false;
  checkMessage(rank, nranks, what, c.type, c.id, c.root, rank, out, c.count);
  for (const Region* r : {&send, &recv}) {
    std::string damage = r->guardDamage();
    if (!damage.empty()) caseFail("rank %d of %d: %s: %s", rank, nranks, what.c_str(), damage.c_str());
  }
  if (!sent.empty() && memcmp(sent.data(), send.data(), sent.size()) != 0)
    caseFail("rank %d of %d: %s: sendbuff was modified", rank, nranks, what.c_str());
  return true;
}

void runAll(int nranks, size_t buffSize, IdMode mode = IdMode::kParent, bool sockets = false) {
  const std::vector<Case> cases = buildCases(nranks, buffSize);
  RunConfig config;
  config.nranks = nranks;
  config.buffSize = buffSize;
  config.mode = mode;
  config.sockets = sockets;
  RunResult result = runOnComm(config, [&](int rank, int n, ncclComm_t comm) {
    if (buffSize == kDefaultBuffSize) {
      if (!runRingShift(comm, rank, n) || !runOrderedMessages(comm, rank, n) ||
          !runUngroupedPairs(comm, rank, n, 1000))
        return 1;
      // Each message a little more than the 4 MiB NCCL_BUFFSIZE.
      if (!runGroupAllToAll(comm, rank, n, ncclFloat32, (5u << 20) / 4 + 7, false, false)) return 1;
    } else {
      // 16 and 40 times the 64 KiB NCCL_BUFFSIZE, in both posting orders, nested or not.
      if (!runGroupAllToAll(comm, rank, n, ncclUint8, (1u << 20) + 3, false, false) ||
          !runGroupAllToAll(comm, rank, n, ncclFloat64, (320u << 10) + 1, true, true) ||
          !runGroupAllToAll(comm, rank, n, ncclBfloat16, (1u << 19) + 5, false, true) ||
          !runUngroupedPairs(comm, rank, n, (1u << 20) / 4 + 1))
        return 1;
    }
    for (const Case& c : cases) {
      bool ok = c.coll == Coll::kAlltoAll ? runAlltoAll(comm, rank, n, c)
                : c.coll == Coll::kGather ? runGather(comm, rank, n, c)
                                          : runScatter(comm, rank, n, c);
      if (!ok) return 1;
    }
    return 0;
  });
  checkRun(config, result, cases.size(), false);
}

}  // namespace

TEST_CASE("send/recv groups, alltoall, gather and scatter on 1 rank copy to self for every type and count",
          "[p2p][alltoall][gather][scatter]") {
  runAll(1, kDefaultBuffSize);
}

TEST_CASE("send/recv groups, alltoall, gather and scatter over 2 ranks deliver every message exactly",
          "[p2p][alltoall][gather][scatter]") {
  runAll(2, kDefaultBuffSize);
}

TEST_CASE("send/recv groups, alltoall, gather and scatter over 3 ranks on sockets deliver every message exactly",
          "[p2p][alltoall][gather][scatter][sockets]") {
  runAll(3, kDefaultBuffSize, IdMode::kEnvCommId, true);
}

TEST_CASE("send/recv groups, alltoall, gather and scatter over 4 ranks deliver every message exactly",
          "[p2p][alltoall][gather][scatter]") {
  runAll(4, kDefaultBuffSize);
}

TEST_CASE("an all-to-all of grouped sends and receives 16 times NCCL_BUFFSIZE completes over 2 ranks",
          "[p2p][pipeline]") {
  runAll(2, kSmallBuffSize);
}

TEST_CASE("an all-to-all of grouped sends and receives 16 times NCCL_BUFFSIZE completes over 3 ranks",
          "[p2p][pipeline]") {
  runAll(3, kSmallBuffSize);
}

TEST_CASE("an all-to-all of grouped sends and receives 16 times NCCL_BUFFSIZE completes over 4 ranks on sockets",
          "[p2p][pipeline][sockets]") {
  runAll(4, kSmallBuffSize, IdMode::kEnvCommId, true);
}

TEST_CASE("an in-place AlltoAll of 1001 ints over 3 ranks delivers every block and is refused inside a group",
          "[alltoall][inplace]") {
  RunResult result = runRanks(3, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s", lastError().c_str());
    const size_t count = 1001;
    std::vector<int32_t> buf(count * n);
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i) buf[p * count + i] = rank * 100000 + p * 10000 + int32_t(i);
    RANK_CHECK(ncclAlltoAll(buf.data(), buf.data(), count, ncclInt32, comm, nullptr) == ncclSuccess, "%s",
               lastError().c_str());
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i)
        RANK_CHECK(buf[p * count + i] == p * 100000 + rank * 10000 + int32_t(i), "block %d element %zu is %d", p, i,
                   buf[p * count + i]);
    ncclGroupStart();
    ncclResult_t r = ncclAlltoAll(buf.data(), buf.data(), count, ncclInt32, comm, nullptr);
    ncclGroupEnd();
    RANK_CHECK(r == ncclInvalidUsage && lastError().find("in-place") != std::string::npos, "inside a group: %d %s",
               int(r), lastError().c_str());
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    return 0;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}
