// AllGather and ReduceScatter on host communicators over every datatype, op, buffer
// placement (in place is NCCL's block-of-the-big-buffer form) and a range of per-rank
// counts, checked against an independent reference: AllGather must place every rank's
// bytes in its block; ReduceScatter's block on each rank must be the exact-integer /
// long-double reduction of that block of every rank's input (reference.h), and a
// repeated ReduceScatter repeats its bits (the ring reduces in a fixed order).
#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

enum class Coll { kAllGather, kReduceScatter };

struct Case {
  uint64_t id;
  Coll coll;
  ncclDataType_t type;
  ncclRedOp_t op;  // ReduceScatter only
  size_t count;    // per rank: AllGather's sendcount, ReduceScatter's recvcount
  bool inPlace;
  size_t skew;
  bool repeat;
};

std::string describe(const Case& c) {
  return caseName(c.coll == Coll::kAllGather ? "allgather" : "reducescatter", c.type,
                  c.coll == Coll::kAllGather ? nullptr : opName(c.op), c.count, -1, c.inPlace, c.id,
                  c.skew ? " misaligned" : "");
}

std::vector<Case> buildCases(size_t buffSize) {
  std::vector<Case> cases;
  const auto& types = allTypes();
  const auto& ops = builtinOps();
  size_t k = 0;
  auto add = [&](Coll coll, ncclDataType_t t, ncclRedOp_t op, size_t count, bool inPlace, bool repeat) {
    cases.push_back({caseId(0xA6, {uint64_t(coll), uint64_t(t), uint64_t(op), count, inPlace, k}), coll, t, op,
                     count, inPlace, (k % 3 == 2) ? typeInfo(t).size : 0, repeat});
    ++k;
  };
  if (buffSize == kDefaultBuffSize) {
    for (ncclDataType_t t : types)
      for (size_t count : smallCounts())
        for (bool inPlace : {false, true}) add(Coll::kAllGather, t, ncclSum, count, inPlace, false);
    for (ncclDataType_t t : types)
      for (ncclRedOp_t op : ops)
        for (size_t ci = 0; ci < smallCounts().size(); ++ci)
          for (bool inPlace : {false, true}) add(Coll::kReduceScatter, t, op, smallCounts()[ci], inPlace, ci % 3 == 1);
    // Blocks a little larger than one 512 KiB pipeline step (the runs with 8 KiB
    // steps below cover many chunks more cheaply).
    add(Coll::kAllGather, ncclFloat64, ncclSum, countSpanningChunks(typeInfo(ncclFloat64), buffSize, 1.1), true,
        false);
    add(Coll::kReduceScatter, ncclFloat64, ncclSum, countSpanningChunks(typeInfo(ncclFloat64), buffSize, 1.1), false,
        true);
  } else {
    // Sampled blocks spanning 2.5 and 5.5 chunks of 8 KiB: every type with both
    // collectives, the ops rotating (prod only at the smaller count), placements
    // alternating.
    for (size_t ti = 0; ti < types.size(); ++ti) {
      const TypeInfo& t = typeInfo(types[ti]);
      for (double chunks : {2.5, 5.5}) {
        const size_t count = countSpanningChunks(t, buffSize, chunks);
        const size_t j = ti + (chunks > 3 ? 1 : 0);
        add(Coll::kAllGather, t.type, ncclSum, count, j % 2 == 0, false);
        add(Coll::kReduceScatter, t.type, largeCountOp(t, j, chunks < 3), count, j % 2 == 1, chunks < 3);
      }
    }
  }
  return cases;
}

bool runAllGather(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;
  const std::string what = describe(c);
  const Inputs in = makeInputs(t, ncclSum, nranks, c.id, c.count);
  std::vector<char> want;
  for (int r = 0; r < nranks; ++r) want.insert(want.end(), in.rank(r), in.rank(r) + bytes);

  Region send(bytes, c.skew), recv(bytes * size_t(nranks), c.skew);
  memcpy(send.data(), in.rank(rank), bytes);
  unsigned char* myBlock = recv.data() + size_t(rank) * bytes;
  if (c.inPlace) memcpy(myBlock, in.rank(rank), bytes);
  const void* sendPtr = c.inPlace ? static_cast<const void*>(myBlock) : send.data();

  rankProgress(what);
  if (!callOk(ncclAllGather(sendPtr, recv.data(), c.count, c.type, comm, nullptr), rank, what, "ncclAllGather"))
    return false;
  std::string wrong = compareExact(t, recv.data(), want.data(), c.count * size_t(nranks));
  if (!wrong.empty()) caseFail("rank %d of %d: %s: %s", rank, nranks, what.c_str(), wrong.c_str());
  std::string damage = recv.guardDamage();
  if (!damage.empty()) caseFail("rank %d of %d: %s: recvbuff %s", rank, nranks, what.c_str(), damage.c_str());
  if (!c.inPlace && memcmp(send.data(), in.rank(rank), bytes) != 0)
    caseFail("rank %d of %d: %s: sendbuff was modified", rank, nranks, what.c_str());
  return true;
}

bool runReduceScatter(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;  // one block
  const size_t total = c.count * size_t(nranks);
  const std::string what = describe(c);
  const Inputs in = makeInputs(t, c.op, nranks, c.id, total);
  const std::vector<const void*> myBlockInputs = in.at(size_t(rank) * c.count, t.size);

  // In place, recvbuff is this rank's block of the (full-size) sendbuff.
  Region send(bytes * size_t(nranks), c.skew), recv(bytes, c.skew);
  memcpy(send.data(), in.rank(rank), bytes * size_t(nranks));
  unsigned char* out = c.inPlace ? send.data() + size_t(rank) * bytes : recv.data();

  rankProgress(what);
  if (!callOk(ncclReduceScatter(send.data(), out, c.count, c.type, c.op, comm, nullptr), rank, what,
              "ncclReduceScatter"))
    return false;
  std::string wrong = compareToReference(t, c.op, myBlockInputs, out, c.count);
  if (!wrong.empty()) caseFail("rank %d of %d: %s: %s", rank, nranks, what.c_str(), wrong.c_str());
  for (const Region* r : {&send, &recv}) {
    std::string damage = r->guardDamage();
    if (!damage.empty())
      caseFail("rank %d of %d: %s: %s %s", rank, nranks, what.c_str(), r == &send ? "sendbuff" : "recvbuff",
               damage.c_str());
  }
  if (!c.inPlace && memcmp(send.data(), in.rank(rank), bytes * size_t(nranks)) != 0)
    caseFail("rank %d of %d: %s: sendbuff was modified", rank, nranks, what.c_str());

  if (c.repeat) {
    std::vector<unsigned char> first(out, out + bytes);
    Region again(bytes * size_t(nranks), c.skew);
    memcpy(again.data(), in.rank(rank), bytes * size_t(nranks));
    unsigned char* out2 = c.inPlace ? again.data() + size_t(rank) * bytes : recv.data();
    if (!c.inPlace) memset(out2, kUnwrittenByte, bytes);
    if (!callOk(ncclReduceScatter(again.data(), out2, c.count, c.type, c.op, comm, nullptr), rank, what,
                "ncclReduceScatter (repeated)"))
      return false;
    if (bytes && memcmp(out2, first.data(), bytes) != 0)
      caseFail("rank %d of %d: %s: a repeated call gave different bits", rank, nranks, what.c_str());
  }
  return true;
}

void runCases(const std::vector<Case>& cases, int nranks, size_t buffSize, IdMode mode = IdMode::kParent,
              bool sockets = false, const char* algo = nullptr, const char* singleCopy = nullptr,
              int callsPerCase = 1, bool sharedBuffers = false) {
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
        bool ok = c.coll == Coll::kAllGather ? runAllGather(comm, rank, n, c) : runReduceScatter(comm, rank, n, c);
        if (!ok) return 1;
      }
    return 0;
  });
  checkRun(config, result, cases.size(), false);
}

void runMatrix(int nranks, size_t buffSize, IdMode mode = IdMode::kParent, bool sockets = false,
               const char* algo = nullptr, const char* singleCopy = nullptr, int callsPerCase = 1,
               bool sharedBuffers = false) {
  runCases(buildCases(buffSize), nranks, buffSize, mode, sockets, algo, singleCopy, callsPerCase, sharedBuffers);
}

}  // namespace

TEST_CASE("allgather and reducescatter on 1 rank copy the input for every type, op and count",
          "[allgather][reducescatter]") {
  runMatrix(1, kDefaultBuffSize);
}

TEST_CASE("allgather and reducescatter over 2 ranks match the reference for every type, op and count",
          "[allgather][reducescatter]") {
  runMatrix(2, kDefaultBuffSize);
}

TEST_CASE("allgather and reducescatter over 3 ranks on sockets match the reference for every type, op and count",
          "[allgather][reducescatter][sockets]") {
  runMatrix(3, kDefaultBuffSize, IdMode::kEnvCommId, true);
}

TEST_CASE("allgather and reducescatter over 4 ranks match the reference for every type, op and count",
          "[allgather][reducescatter]") {
  runMatrix(4, kDefaultBuffSize);
}

TEST_CASE("allgather and reducescatter over 2 ranks pipeline blocks spanning many 8 KiB chunks",
          "[allgather][reducescatter][pipeline]") {
  runMatrix(2, kSmallBuffSize);
}

TEST_CASE("allgather and reducescatter over 3 ranks pipeline blocks spanning many 8 KiB chunks",
          "[allgather][reducescatter][pipeline]") {
  runMatrix(3, kSmallBuffSize, IdMode::kEnvCommId);
}

TEST_CASE("allgather and reducescatter over 4 ranks on sockets pipeline blocks spanning many 8 KiB chunks",
          "[allgather][reducescatter][pipeline][sockets]") {
  runMatrix(4, kSmallBuffSize, IdMode::kParent, true);
}

// NCCL_ALGO=Direct forces the mesh schedules (src/sched/build_direct.h) at
// every size (reducescatter: one-shot, each rank reducing the n copies of
// its block in rank order).
TEST_CASE("allgather and reducescatter over 3 ranks with NCCL_ALGO=Direct match the reference for every type, op and count",
          "[allgather][reducescatter][direct]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(3, kDefaultBuffSize, IdMode::kParent, false, "Direct");
}

TEST_CASE("allgather and reducescatter over 4 ranks with NCCL_ALGO=Direct match the reference for every type, op and count",
          "[allgather][reducescatter][direct]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(4, kDefaultBuffSize, IdMode::kParent, false, "Direct");
}

TEST_CASE("allgather and reducescatter over 3 ranks on sockets with NCCL_ALGO=Direct pipeline many 8 KiB chunks",
          "[allgather][reducescatter][direct][pipeline][sockets]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(3, kSmallBuffSize, IdMode::kEnvCommId, true, "Direct");
}

TEST_CASE("allgather and reducescatter over 4 ranks with NCCL_ALGO=Direct pipeline many 8 KiB chunks", "[allgather][reducescatter][direct][pipeline]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(4, kSmallBuffSize, IdMode::kParent, false, "Direct");
}

// GYRE_SINGLE_COPY=always: allgather reads the peers' buffers in place
// (process_vm_readv; src/sched/build_single_copy.h) at every size, over the
// ring pair on 2 ranks and the mesh on 3 and 4. Where the kernel forbids
// cross-memory attach the communicator falls back to two copies and these
// runs test the fallback.
TEST_CASE("allgather and reducescatter over 2, 3 and 4 ranks with GYRE_SINGLE_COPY=always match the reference for every type and count",
          "[allgather][singlecopy]") {
  if (testDeviceComms()) return;  // host communicators only
  for (int nranks : {2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, kDefaultBuffSize, IdMode::kParent, false, nullptr, "always");
  }
}

TEST_CASE("allgather and reducescatter over 3 ranks with GYRE_SINGLE_COPY=always read counts spanning many steps",
          "[allgather][singlecopy][pipeline]") {
  if (testDeviceComms()) return;
  runMatrix(3, kSmallBuffSize, IdMode::kParent, false, nullptr, "always");
}

// The same with every buffer from gyreMemAllocHost: the reads go through the
// peers' mappings with memcpy (src/host/peer_mappings.h).
TEST_CASE("allgather and reducescatter over 2, 3 and 4 ranks with GYRE_SINGLE_COPY=always on gyreMemAllocHost "
          "buffers match the reference for every type and count",
          "[allgather][singlecopy][sharedbuffers]") {
  if (testDeviceComms()) return;
  for (int nranks : {2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, kDefaultBuffSize, IdMode::kParent, false, nullptr, "always", 1, true);
  }
  runMatrix(3, kSmallBuffSize, IdMode::kParent, false, nullptr, "always", 1, true);
}

// Without GYRE_SINGLE_COPY, AllGather runs single copy by value from 8 KiB
// (heap buffers through the FIFO, gyreMemAllocHost ones read in place) and
// by reference above the process_vm_readv thresholds.
TEST_CASE("allgather and reducescatter over 2 and 4 ranks on gyreMemAllocHost buffers match the reference for every type and count",
          "[allgather][singlecopy][sharedbuffers]") {
  if (testDeviceComms()) return;
  runMatrix(2, kDefaultBuffSize, IdMode::kParent, false, nullptr, nullptr, 1, true);
  runMatrix(2, kSmallBuffSize, IdMode::kParent, false, nullptr, nullptr, 1, true);
  runMatrix(4, kDefaultBuffSize, IdMode::kParent, false, nullptr, nullptr, 1, true);
}

// On 3+ ranks a heap piece of 128 KiB or more is copied once into the
// owner's outbox (src/host/outbox.h), which every peer reads through its
// mapping. Blocks of one and of several 512 KiB pieces, a 5 MiB block whose
// pieces reuse the outbox's slots within the call, then small ones again,
// each called twice (the second call finds slots its peers read before).
TEST_CASE("allgather over 3 and 4 ranks of heap blocks staged once in an outbox the peers read matches the reference, "
          "across slot reuse within and between calls",
          "[allgather][outbox]") {
  if (testDeviceComms()) return;  // host communicators only
  std::vector<Case> cases;
  auto add = [&](ncclDataType_t t, size_t count, bool inPlace, size_t skew) {
    cases.push_back({caseId(0xB0, {uint64_t(t), count, inPlace, cases.size()}), Coll::kAllGather, t, ncclSum, count,
                     inPlace, skew ? typeInfo(t).size : 0, false});
  };
  add(ncclFloat32, 40000, false, 0);           // one 160 KB piece
  add(ncclFloat64, 3 * 65536 + 5, true, 1);    // several pieces, the last short; misaligned
  add(ncclUint8, (5 << 20) + 3, false, 0);     // 11 pieces of up to 512 KiB
  add(ncclFloat32, 40000, true, 0);
  add(ncclInt32, 1000, false, 0);              // below the outbox: by value in the FIFO
  for (int nranks : {3, 4}) {
    INFO(nranks << " ranks");
    runCases(cases, nranks, kDefaultBuffSize, IdMode::kParent, false, nullptr, nullptr, 2);
  }
}

// Every case twice in a row, on fresh buffers: the second call reuses the
// first's plan and lanes (src/host/repeat_call.h) with its own buffers.
TEST_CASE("allgather and reducescatter over 1 to 4 ranks called twice per case, the second reusing the first's plan "
          "and lanes, match the reference for every type, op and count",
          "[allgather][reducescatter][repeat]") {
  if (testDeviceComms()) return;  // the repeat path is the host executor's
  for (int nranks : {1, 2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, kDefaultBuffSize, IdMode::kParent, false, nullptr, nullptr, 2);
  }
}

TEST_CASE("allgather and reducescatter over 4 ranks called twice per case pipeline many 8 KiB chunks with reused lanes",
          "[allgather][reducescatter][repeat][pipeline]") {
  if (testDeviceComms()) return;
  runMatrix(4, kSmallBuffSize, IdMode::kParent, false, nullptr, nullptr, 2);
}
