// Broadcast (and the in-place ncclBcast) and Reduce on host communicators, over every
// datatype, op, root, buffer placement and a range of counts, checked against an
// independent reference: Broadcast must deliver the root's bytes exactly; Reduce's root
// must hold the exact-integer / long-double reduction of all inputs (reference.h), the
// other ranks' buffers stay untouched, and a repeated Reduce repeats its bits (the chain
// reduces in a fixed order).
//
// One forked run per rank count does the whole small-count matrix; the runs with
// NCCL_BUFFSIZE=65536 (8 KiB pipeline steps) add a sampled set of counts spanning
// several chunks.
#include <unistd.h>

#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

enum class Coll { kBroadcast, kBcast, kReduce };

struct Case {
  uint64_t id;
  Coll coll;
  ncclDataType_t type;
  ncclRedOp_t op;  // Reduce only
  size_t count;
  int root;
  bool inPlace;
  size_t skew;       // bytes past 16-byte alignment (a multiple of the element size)
  bool nullNonRoot;  // non-root ranks pass NULL for the buffer the call ignores there
  bool repeat;       // call again and require the same bits
};

std::string describe(const Case& c) {
  const char* name = c.coll == Coll::kReduce ? "reduce" : c.coll == Coll::kBcast ? "bcast" : "broadcast";
  std::string extra;
  if (c.skew) extra += " misaligned";
  if (c.nullNonRoot) extra += " (NULL off-root buffer)";
  return caseName(name, c.type, c.coll == Coll::kReduce ? opName(c.op) : nullptr, c.count, c.root, c.inPlace, c.id,
                  extra.c_str());
}

std::vector<Case> buildCases(int nranks, size_t buffSize) {
  std::vector<Case> cases;
  const auto& types = allTypes();
  const auto& ops = builtinOps();
  size_t k = 0;  // rotates roots, skews and NULL buffers over the matrix
  auto add = [&](Coll coll, ncclDataType_t t, ncclRedOp_t op, size_t count, int root, bool inPlace, bool repeat) {
    const size_t size = typeInfo(t).size;
    Case c{caseId(0xB0, {uint64_t(coll), uint64_t(t), uint64_t(op), count, uint64_t(root), inPlace, k}),
           coll, t, op, count, root, inPlace, (k % 3 == 1) ? size : 0,
           !inPlace && (k % 4 == 3), repeat};
    cases.push_back(c);
    ++k;
  };
  if (buffSize == kDefaultBuffSize) {
    for (size_t ti = 0; ti < types.size(); ++ti)
      for (size_t ci = 0; ci < smallCounts().size(); ++ci)
        for (bool inPlace : {false, true}) {
          const int root = int((ti + ci) % size_t(nranks));
          add(inPlace && ci % 2 ? Coll::kBcast : Coll::kBroadcast, types[ti], ncclSum, smallCounts()[ci], root, inPlace,
              false);
        }
    // Every root, for one type of each size.
    for (ncclDataType_t t : {ncclUint8, ncclBfloat16, ncclFloat32, ncclInt64})
      for (int root = 0; root < nranks; ++root) {
        add(Coll::kBroadcast, t, ncclSum, 61, root, root % 2 == 1, false);
        for (ncclRedOp_t op : {ncclSum, ncclMax})
          add(Coll::kReduce, t, op, 61, root, root % 2 == 0, true);
      }
    for (size_t ti = 0; ti < types.size(); ++ti)
      for (size_t oi = 0; oi < ops.size(); ++oi)
        for (size_t ci = 0; ci < smallCounts().size(); ++ci)
          for (bool inPlace : {false, true}) {
            const int root = int((ti + oi + ci) % size_t(nranks));
            add(Coll::kReduce, types[ti], ops[oi], smallCounts()[ci], root, inPlace, ci % 3 == 0);
          }
    // A little larger than one 512 KiB pipeline step (the runs with 8 KiB steps below
    // cover many chunks more cheaply).
    for (ncclDataType_t t : {ncclInt8, ncclFloat32}) {
      const size_t count = countSpanningChunks(typeInfo(t), buffSize, 1.1);
      add(Coll::kBroadcast, t, ncclSum, count, nranks - 1, t == ncclInt8, false);
      add(Coll::kReduce, t, t == ncclInt8 ? ncclMin : ncclSum, count, nranks / 2, t == ncclFloat32, true);
    }
  } else {
    // Sampled counts spanning 2.5 and 6.5 chunks of 8 KiB: every type with both
    // collectives, the ops rotating (prod only at the smaller count), roots and
    // placements alternating.
    for (size_t ti = 0; ti < types.size(); ++ti) {
      const TypeInfo& t = typeInfo(types[ti]);
      for (double chunks : {2.5, 6.5}) {
        const size_t count = countSpanningChunks(t, buffSize, chunks);
        const int root = int((ti + (chunks > 3 ? 1 : 0)) % size_t(nranks));
        const bool inPlace = (ti + (chunks > 3 ? 1 : 0)) % 2 == 1;
        add(Coll::kBroadcast, t.type, ncclSum, count, root, inPlace, false);
        add(inPlace ? Coll::kBcast : Coll::kBroadcast, t.type, ncclSum, count + 1, (root + 1) % nranks, inPlace,
            false);
        add(Coll::kReduce, t.type, largeCountOp(t, ti + 1 + (chunks > 3 ? 2 : 0), chunks < 3), count, root,
            inPlace, chunks < 3);
      }
    }
  }
  return cases;
}

// Returns false when a call failed and the rank should stop.
bool runBroadcast(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;
  const std::string what = describe(c);
  std::vector<char> rootInput(bytes);
  fillRankInput(c.type, ncclSum, nranks, c.id, c.root, rootInput.data(), c.count);

  Region send(bytes, c.skew), recv(bytes, c.skew);
  // A zero count's input is an empty vector whose data() may be NULL, which
  // memcpy and memcmp may not be given even for 0 bytes.
  if (rank == c.root && bytes) memcpy(send.data(), rootInput.data(), bytes);
  if (c.inPlace && rank == c.root && bytes) memcpy(recv.data(), rootInput.data(), bytes);
  const void* sendPtr = c.inPlace ? recv.data() : (rank != c.root && c.nullNonRoot) ? nullptr : send.data();

  rankProgress(what);
  ncclResult_t r = c.coll == Coll::kBcast
                       ? ncclBcast(recv.data(), c.count, c.type, c.root, comm, nullptr)
                       : ncclBroadcast(sendPtr, recv.data(), c.count, c.type, c.root, comm, nullptr);
  if (!callOk(r, rank, what, c.coll == Coll::kBcast ? "ncclBcast" : "ncclBroadcast")) return false;

  std::string wrong = compareExact(t, recv.data(), rootInput.data(), c.count);
  if (!wrong.empty()) caseFail("rank %d of %d: %s: %s", rank, nranks, what.c_str(), wrong.c_str());
  std::string damage = recv.guardDamage();
  if (!damage.empty()) caseFail("rank %d of %d: %s: recvbuff %s", rank, nranks, what.c_str(), damage.c_str());
  if (!c.inPlace && rank == c.root && bytes && memcmp(send.data(), rootInput.data(), bytes) != 0)
    caseFail("rank %d of %d: %s: the root's sendbuff was modified", rank, nranks, what.c_str());
  if (!c.inPlace && rank != c.root) {
    std::vector<unsigned char> untouched(bytes, kUnwrittenByte);
    if (bytes && memcmp(send.data(), untouched.data(), bytes) != 0)
      caseFail("rank %d of %d: %s: a non-root sendbuff was written", rank, nranks, what.c_str());
  }
  return true;
}

bool runReduce(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;
  const std::string what = describe(c);
  const Inputs in = makeInputs(t, c.op, nranks, c.id, c.count);
  const bool isRoot = rank == c.root;

  Region send(bytes, c.skew), recv(bytes, c.skew);
  memcpy(send.data(), in.rank(rank), bytes);
  if (c.inPlace) memcpy(recv.data(), in.rank(rank), bytes);
  const void* sendPtr = c.inPlace ? recv.data() : send.data();
  void* recvPtr = (!isRoot && c.nullNonRoot) ? nullptr : recv.data();

  rankProgress(what);
  if (!callOk(ncclReduce(sendPtr, recvPtr, c.count, c.type, c.op, c.root, comm, nullptr), rank, what, "ncclReduce"))
    return false;

  if (isRoot) {
    std::string wrong = compareToReference(t, c.op, in.at(0, t.size), recv.data(), c.count);
    if (!wrong.empty()) caseFail("rank %d of %d: %s: %s", rank, nranks, what.c_str(), wrong.c_str());
  } else if (c.inPlace) {
    if (memcmp(recv.data(), in.rank(rank), bytes) != 0)
      caseFail("rank %d of %d: %s: a non-root rank's in-place buffer was modified", rank, nranks, what.c_str());
  } else {
    std::vector<unsigned char> untouched(bytes, kUnwrittenByte);
    if (bytes && memcmp(recv.data(), untouched.data(), bytes) != 0)
      caseFail("rank %d of %d: %s: a non-root recvbuff was written", rank, nranks, what.c_str());
  }
  std::string damage = recv.guardDamage();
  if (!damage.empty()) caseFail("rank %d of %d: %s: recvbuff %s", rank, nranks, what.c_str(), damage.c_str());
  if (!c.inPlace && memcmp(send.data(), in.rank(rank), bytes) != 0)
    caseFail("rank %d of %d: %s: sendbuff was modified", rank, nranks, what.c_str());

  if (c.repeat) {
    Region again(bytes, c.skew);
    if (c.inPlace) memcpy(again.data(), in.rank(rank), bytes);
    const void* againSend = c.inPlace ? again.data() : send.data();
    if (!callOk(ncclReduce(againSend, again.data(), c.count, c.type, c.op, c.root, comm, nullptr), rank, what,
                "ncclReduce (repeated)"))
      return false;
    if (isRoot && bytes && memcmp(again.data(), recv.data(), bytes) != 0)
      caseFail("rank %d of %d: %s: a repeated call gave different bits at the root", rank, nranks, what.c_str());
  }
  return true;
}

void runMatrix(int nranks, size_t buffSize, IdMode mode = IdMode::kParent, bool sockets = false,
               const char* algo = nullptr, const char* singleCopy = nullptr, int callsPerCase = 1,
               bool sharedBuffers = false) {
  const std::vector<Case> cases = buildCases(nranks, buffSize);
  RunConfig config;
  config.nranks = nranks;
  config.buffSize = buffSize;
  config.mode = mode;
  config.sockets = sockets;
  config.algo = algo;
  config.callsPerCase = callsPerCase;
  if (singleCopy) config.env.push_back({"GYRE_SINGLE_COPY", std::string(singleCopy)});
  if (sharedBuffers) config.env.push_back({"GYRE_TEST_SHARED_BUFFERS", "1"});
  RunResult result = runOnComm(config, [&](int rank, int n, ncclComm_t comm) {
    for (const Case& c : cases)
      for (int call = 0; call < callsPerCase; ++call) {
        bool ok = c.coll == Coll::kReduce ? runReduce(comm, rank, n, c) : runBroadcast(comm, rank, n, c);
        if (!ok) return 1;
      }
    return 0;
  });
  checkRun(config, result, cases.size(), false);
}

}  // namespace

TEST_CASE("broadcast and reduce on 1 rank copy the input for every type, op and count", "[broadcast][reduce]") {
  runMatrix(1, kDefaultBuffSize);
}

TEST_CASE("broadcast and reduce over 2 ranks match the reference for every type, op, root and count",
          "[broadcast][reduce]") {
  runMatrix(2, kDefaultBuffSize);
}

TEST_CASE("broadcast and reduce over 3 ranks on sockets match the reference for every type, op, root and count",
          "[broadcast][reduce][sockets]") {
  runMatrix(3, kDefaultBuffSize, IdMode::kEnvCommId, true);
}

TEST_CASE("broadcast and reduce over 4 ranks match the reference for every type, op, root and count",
          "[broadcast][reduce]") {
  runMatrix(4, kDefaultBuffSize);
}

TEST_CASE("broadcast and reduce over 2 ranks on sockets pipeline counts spanning many 8 KiB chunks",
          "[broadcast][reduce][pipeline][sockets]") {
  runMatrix(2, kSmallBuffSize, IdMode::kParent, true);
}

TEST_CASE("broadcast and reduce over 3 ranks pipeline counts spanning many 8 KiB chunks",
          "[broadcast][reduce][pipeline]") {
  runMatrix(3, kSmallBuffSize);
}

TEST_CASE("broadcast and reduce over 4 ranks pipeline counts spanning many 8 KiB chunks",
          "[broadcast][reduce][pipeline]") {
  runMatrix(4, kSmallBuffSize, IdMode::kEnvCommId);
}

// NCCL_ALGO=Direct forces the mesh schedules (src/sched/build_direct.h) at
// every size; reduce has none and keeps its ring.
TEST_CASE("broadcast and reduce over 3 ranks with NCCL_ALGO=Direct match the reference for every type, op and count",
          "[broadcast][reduce][direct]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(3, kDefaultBuffSize, IdMode::kParent, false, "Direct");
}

TEST_CASE("broadcast and reduce over 4 ranks with NCCL_ALGO=Direct match the reference for every type, op and count",
          "[broadcast][reduce][direct]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(4, kDefaultBuffSize, IdMode::kParent, false, "Direct");
}

TEST_CASE("broadcast and reduce over 3 ranks on sockets with NCCL_ALGO=Direct pipeline many 8 KiB chunks",
          "[broadcast][reduce][direct][pipeline][sockets]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(3, kSmallBuffSize, IdMode::kEnvCommId, true, "Direct");
}

TEST_CASE("broadcast and reduce over 4 ranks with NCCL_ALGO=Direct pipeline many 8 KiB chunks", "[broadcast][reduce][direct][pipeline]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(4, kSmallBuffSize, IdMode::kParent, false, "Direct");
}

// GYRE_SINGLE_COPY=always: broadcast reads the peers' buffers in place
// (process_vm_readv; src/sched/build_single_copy.h) at every size, over the
// ring pair on 2 ranks and the mesh on 3 and 4. Where the kernel forbids
// cross-memory attach the communicator falls back to two copies and these
// runs test the fallback.
TEST_CASE("broadcast and reduce over 2, 3 and 4 ranks with GYRE_SINGLE_COPY=always match the reference for every type and count",
          "[broadcast][singlecopy]") {
  if (testDeviceComms()) return;  // host communicators only
  for (int nranks : {2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, kDefaultBuffSize, IdMode::kParent, false, nullptr, "always");
  }
}

TEST_CASE("broadcast and reduce over 3 ranks with GYRE_SINGLE_COPY=always read counts spanning many steps",
          "[broadcast][singlecopy][pipeline]") {
  if (testDeviceComms()) return;
  runMatrix(3, kSmallBuffSize, IdMode::kParent, false, nullptr, "always");
}

// On 2 ranks each piece is split: the reader reads two thirds, the root
// writes the last third into the reader's output (process_vm_writev), so
// counts spanning many 64 KiB pieces check every cut.
TEST_CASE("broadcast over 2 ranks with GYRE_SINGLE_COPY=always splits counts spanning many pieces between reader and root",
          "[broadcast][singlecopy][pipeline]") {
  if (testDeviceComms()) return;
  runMatrix(2, kSmallBuffSize, IdMode::kParent, false, nullptr, "always");
}

// The same with every buffer from gyreMemAllocHost: the reads (and the
// 2-rank root's writes) go through the peers' mappings with memcpy
// (src/host/peer_mappings.h), each case on fresh allocations.
TEST_CASE("broadcast and reduce over 2, 3 and 4 ranks with GYRE_SINGLE_COPY=always on gyreMemAllocHost buffers match "
          "the reference for every type and count",
          "[broadcast][singlecopy][sharedbuffers]") {
  if (testDeviceComms()) return;
  for (int nranks : {2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, kDefaultBuffSize, IdMode::kParent, false, nullptr, "always", 1, true);
  }
  runMatrix(2, kSmallBuffSize, IdMode::kParent, false, nullptr, "always", 1, true);
}

// Without GYRE_SINGLE_COPY, Broadcast runs single copy by value from 8 KiB
// on any rank count (heap buffers through the FIFO, gyreMemAllocHost ones
// read in place through the peers' mappings).
TEST_CASE("broadcast and reduce over 2 and 4 ranks on gyreMemAllocHost buffers match the reference for every type "
          "and count", "[broadcast][singlecopy][sharedbuffers]") {
  if (testDeviceComms()) return;
  runMatrix(2, kDefaultBuffSize, IdMode::kParent, false, nullptr, nullptr, 1, true);
  runMatrix(2, kSmallBuffSize, IdMode::kParent, false, nullptr, nullptr, 1, true);
  runMatrix(4, kDefaultBuffSize, IdMode::kParent, false, nullptr, nullptr, 1, true);
}

// Every case twice in a row, on fresh buffers: the second call repeats the
// first's shape, so it runs the plan and lanes the first built
// (src/host/repeat_call.h) rebound to its own buffers; the next case's
// other shape (count, type, root, placement) drops them again.
TEST_CASE("broadcast and reduce over 1 to 4 ranks called twice per case, the second reusing the first's plan and lanes, "
          "match the reference for every type, op, root and count",
          "[broadcast][reduce][repeat]") {
  if (testDeviceComms()) return;  // the repeat path is the host executor's
  for (int nranks : {1, 2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, kDefaultBuffSize, IdMode::kParent, false, nullptr, nullptr, 2);
  }
}

TEST_CASE("broadcast and reduce over 3 ranks called twice per case pipeline many 8 KiB chunks with reused lanes",
          "[broadcast][reduce][repeat][pipeline]") {
  if (testDeviceComms()) return;
  runMatrix(3, kSmallBuffSize, IdMode::kParent, false, nullptr, nullptr, 2);
}

// A shared-memory sender of steps of up to 32 bytes may run up to 64 steps
// ahead of its receiver, of up to 2 KiB 16, 8 otherwise (src/transport/fifo.h).
// Here the ranks that receive start 100 ms late, so the sending ranks fill
// the lines, wait, and go on: 700 calls of 1 to 8 int32s, every 100th call
// 40000 int32s (a slot of its own). Broadcast: the root runs ahead; Reduce
// with a late root: its chain's first ranks do. Every call's elements must
// arrive, in call order.
void runAhead(int nranks, const char* algo) {
  RunConfig config;
  config.nranks = nranks;
  config.algo = algo;
  constexpr int kCalls = 700;
  auto countOf = [](int i) -> size_t { return i % 100 == 99 ? 40000 : 1 + i % 8; };
  RunResult result = runOnComm(config, [&](int rank, int n, ncclComm_t comm) {
    std::vector<int32_t> buf(40000);
    const int root = 0;
    if (rank != root) usleep(100000);
    for (int i = 0; i < kCalls; ++i) {
      const size_t count = countOf(i);
      for (size_t j = 0; j < count; ++j) buf[j] = rank == root ? int32_t(i * 1000 + j) : -1;
      ncclResult_t r = ncclBroadcast(buf.data(), buf.data(), count, ncclInt32, root, comm, nullptr);
      RANK_CHECK(r == ncclSuccess, "rank %d: broadcast %d returned %d: %s", rank, i, int(r), lastError().c_str());
      for (size_t j = 0; j < count; ++j)
        RANK_CHECK(buf[j] == int32_t(i * 1000 + j), "rank %d: broadcast %d of %zu: element %zu is %d, expected %d",
                   rank, i, count, j, buf[j], int(i * 1000 + j));
    }
    if (rank == root) usleep(100000);
    std::vector<int32_t> out(40000);
    for (int i = 0; i < kCalls; ++i) {
      const size_t count = countOf(i);
      for (size_t j = 0; j < count; ++j) buf[j] = int32_t((rank + 1) * (i + j));
      ncclResult_t r = ncclReduce(buf.data(), out.data(), count, ncclInt32, ncclSum, root, comm, nullptr);
      RANK_CHECK(r == ncclSuccess, "rank %d: reduce %d returned %d: %s", rank, i, int(r), lastError().c_str());
      if (rank != root) continue;
      const int32_t ranksSum = n * (n + 1) / 2;
      for (size_t j = 0; j < count; ++j)
        RANK_CHECK(out[j] == int32_t(ranksSum * (i + j)), "rank %d: reduce %d of %zu: element %zu is %d, expected %d",
                   rank, i, count, j, out[j], int(ranksSum * (i + j)));
    }
    return 0;
  });
  checkRun(config, result, 2 * kCalls, false);
}

TEST_CASE("broadcast roots and reduce senders run hundreds of small calls ahead of late ranks over shared memory, "
          "across calls that need a slot, and every call arrives in order",
          "[broadcast][reduce][shm]") {
  if (testDeviceComms()) return;  // slot lines are the shared-memory transport's
  for (int nranks : {2, 4}) {
    INFO(nranks << " ranks");
    runAhead(nranks, nullptr);
  }
  INFO("4 ranks, NCCL_ALGO=Direct");
  runAhead(4, "Direct");
}
