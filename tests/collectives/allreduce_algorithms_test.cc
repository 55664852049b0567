// AllReduce with each algorithm forced through NCCL_ALGO (Ring; Tree, the double binary
// tree) over all twelve datatypes and five ops, checked against the independent
// reference (reference.h: exact integers modulo 2^bits, long-double floats within a
// tolerance from the type's epsilon and the rank count). Within one algorithm every
// rank must hold bitwise identical results and a repeated call must repeat the bits;
// ring and tree may differ from each other in the last bits of a float sum. Integer
// avg of sums that overflow is checked against the documented wrapped-sum quotient.
//
// The last test runs the same cases four times — forced one-shot (Direct), tree,
// ring, and NCCL_ALGO unset — and checks that the default gives the one-shot's bits
// up to 16 KiB on 3 ranks, the tree's up to 64 KiB and the ring's above: the cost model's choice on the shipped topology of
// the CI machine (tests/topologies/ci_vm.xml), which the README states.
#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

struct Case {
  uint64_t id;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
  bool inPlace;
  size_t skew;
  bool repeat;
};

std::string describe(const Case& c) {
  return caseName("allreduce", c.type, opName(c.op), c.count, -1, c.inPlace, c.id, c.skew ? " misaligned" : "");
}

std::vector<Case> buildCases(size_t buffSize) {
  std::vector<Case> cases;
  const auto& types = allTypes();
  const auto& ops = builtinOps();
  size_t k = 0;
  auto add = [&](ncclDataType_t t, ncclRedOp_t op, size_t count, bool inPlace, bool repeat) {
    cases.push_back({caseId(0xA11, {uint64_t(t), uint64_t(op), count, inPlace, k}), t, op, count, inPlace,
                     (k % 3 == 1) ? typeInfo(t).size : 0, repeat});
    ++k;
  };
  if (buffSize == kDefaultBuffSize) {
    // Every type, op and count, each in place and out of place. A third of them are
    // called twice to check that the bits repeat, in one placement only (alternating):
    // repeating is about the schedule, which the placement does not change.
    for (ncclDataType_t t : types)
      for (size_t oi = 0; oi < ops.size(); ++oi)
        for (size_t ci = 0; ci < smallCounts().size(); ++ci)
          for (bool inPlace : {false, true})
            add(t, ops[oi], smallCounts()[ci], inPlace, ci % 3 == 0 && inPlace == ((ci + oi) % 2 == 1));
    // Past the 64 KiB the default rule gives to the tree, and past one 512 KiB step.
    add(ncclFloat32, ncclSum, (96 << 10) / 4 + 3, false, true);
    add(ncclBfloat16, ncclAvg, (96 << 10) / 2 + 1, true, false);
    add(ncclInt64, ncclSum, countSpanningChunks(typeInfo(ncclInt64), buffSize, 1.1), true, true);
  } else {
    // Sampled counts spanning 2.5 and 5.5 chunks of 8 KiB: every type, the ops
    // rotating (prod only at the smaller count), placements alternating.
    for (size_t ti = 0; ti < types.size(); ++ti) {
      const TypeInfo& t = typeInfo(types[ti]);
      for (double chunks : {2.5, 5.5}) {
        const size_t j = ti + (chunks > 3 ? 1 : 0);
        add(t.type, largeCountOp(t, j + 2, chunks < 3), countSpanningChunks(t, buffSize, chunks), j % 2 == 0,
            chunks < 3);
      }
    }
  }
  return cases;
}

bool runCase(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;
  const std::string what = describe(c);
  const Inputs in = makeInputs(t, c.op, nranks, c.id, c.count);

  Region send(bytes, c.skew), recv(bytes, c.skew);
  memcpy(send.data(), in.rank(rank), bytes);
  if (c.inPlace) memcpy(recv.data(), in.rank(rank), bytes);
  const void* sendPtr = c.inPlace ? recv.data() : send.data();

  rankProgress(what);
  if (!callOk(ncclAllReduce(sendPtr, recv.data(), c.count, c.type, c.op, comm, nullptr), rank, what,
              "ncclAllReduce"))
    return false;
  std::string wrong = compareToReference(t, c.op, in.at(0, t.size), recv.data(), c.count);
  if (!wrong.empty()) caseFail("rank %d of %d: %s: %s", rank, nranks, what.c_str(), wrong.c_str());
  std::string damage = recv.guardDamage();
  if (!damage.empty()) caseFail("rank %d of %d: %s: recvbuff %s", rank, nranks, what.c_str(), damage.c_str());
  if (!c.inPlace && memcmp(send.data(), in.rank(rank), bytes) != 0)
    caseFail("rank %d of %d: %s: sendbuff was modified", rank, nranks, what.c_str());
  rankRecord(what, hexHash(recv.data(), bytes));

  if (c.repeat) {
    Region again(bytes, c.skew);
    if (c.inPlace) memcpy(again.data(), in.rank(rank), bytes);
    const void* againSend = c.inPlace ? again.data() : send.data();
    if (!callOk(ncclAllReduce(againSend, again.data(), c.count, c.type, c.op, comm, nullptr), rank, what,
                "ncclAllReduce (repeated)"))
      return false;
    if (bytes && memcmp(again.data(), recv.data(), bytes) != 0)
      caseFail("rank %d of %d: %s: a repeated call gave different bits", rank, nranks, what.c_str());
  }
  return true;
}

// Integer avg is the wrapping sum divided once by nranks, truncating toward zero
// (README), so when the sum overflows the result is the wrapped sum's quotient, not the
// mathematical mean. (fillInput keeps the matrix's avg inputs from overflowing.)
bool runWrappedAverage(ncclComm_t comm, int rank, int nranks) {
  for (ncclDataType_t type : {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64}) {
    const TypeInfo& t = typeInfo(type);
    const bool isSigned = t.kind == Kind::kSigned;
    const uint64_t mask = intMask(t), top = isSigned ? mask >> 1 : mask;  // the largest value
    const uint64_t bottom = isSigned ? ~(mask >> 1) & mask : 0;          // the smallest
    // Per element, what rank r contributes.
    auto value = [&](size_t i, int r) -> uint64_t {
      switch (i) {
        case 0: return top;                          // every rank: overflows from 2 ranks on
        case 1: return (top - uint64_t(r)) & mask;
        case 2: return r % 2 ? bottom : top;
        case 3: return isSigned ? bottom : (top / 2 + 1 + uint64_t(r)) & mask;
        default: return (top / 3 * uint64_t(r + 1)) & mask;
      }
    };
    const size_t count = 5;
    std::vector<char> in(count * t.size), out(count * t.size);
    for (size_t i = 0; i < count; ++i) storeBits(t, value(i, rank), in.data() + i * t.size);
    const std::string what = std::string(t.name) + " avg of sums that overflow";
    if (!callOk(ncclAllReduce(in.data(), out.data(), count, type, ncclAvg, comm, nullptr), rank, what,
                "ncclAllReduce"))
      return false;
    for (size_t i = 0; i < count; ++i) {
      uint64_t sum = 0;
      for (int r = 0; r < nranks; ++r) sum += value(i, r);
      sum &= mask;
      uint64_t want;
      if (isSigned) {
        const int64_t wrapped = loadSigned(t, &sum);  // little-endian: the low bytes hold it
        want = uint64_t(wrapped / int64_t(nranks)) & mask;
      } else {
        want = (sum / uint64_t(nranks)) & mask;
      }
      const uint64_t have = loadUnsigned(t, out.data() + i * t.size) & mask;
      if (have != want)
        caseFail("rank %d of %d: %s: element %zu: got %s, expected %s (the wrapped sum divided by %d)", rank, nranks,
                 what.c_str(), i, formatElement(t, out.data() + i * t.size).c_str(), formatElement(t, &want).c_str(),
                 nranks);
    }
  }
  return true;
}

RunResult runCases(const RunConfig& config, const std::vector<Case>& cases) {
  return runOnComm(config, [&](int rank, int n, ncclComm_t comm) {
    for (const Case& c : cases)
      for (int call = 0; call < config.callsPerCase; ++call)
        if (!runCase(comm, rank, n, c)) return 1;
    if (config.buffSize == kDefaultBuffSize && !runWrappedAverage(comm, rank, n)) return 1;
    return 0;
  });
}

void runMatrix(int nranks, const char* algo, size_t buffSize, IdMode mode = IdMode::kParent, bool sockets = false,
               int callsPerCase = 1, std::vector<std::pair<std::string, std::optional<std::string>>> env = {}) {
  std::vector<Case> cases = buildCases(buffSize);
  // Whether a schedule repeats its bits does not depend on the transport, and over
  // sockets each call costs milliseconds on 3-4 ranks: the shared-memory runs repeat.
  if (sockets)
    for (Case& c : cases) c.repeat = false;
  RunConfig config;
  config.nranks = nranks;
  config.algo = algo;
  config.buffSize = buffSize;
  config.mode = mode;
  config.sockets = sockets;
  config.callsPerCase = callsPerCase;
  config.env = std::move(env);
  checkRun(config, runCases(config, cases), cases.size(), true);
}

}  // namespace

TEST_CASE("allreduce on 1 rank with NCCL_ALGO=Tree copies the input for every type, op and count",
          "[allreduce][tree]") {
  runMatrix(1, "Tree", kDefaultBuffSize);
}

TEST_CASE("ring allreduce over 2 ranks matches the reference and agrees bitwise on every rank",
          "[allreduce][ring]") {
  runMatrix(2, "Ring", kDefaultBuffSize);
}

TEST_CASE("ring allreduce over 3 ranks on sockets matches the reference and agrees bitwise on every rank",
          "[allreduce][ring][sockets]") {
  runMatrix(3, "Ring", kDefaultBuffSize, IdMode::kEnvCommId, true);
}

TEST_CASE("ring allreduce over 4 ranks matches the reference and agrees bitwise on every rank",
          "[allreduce][ring]") {
  runMatrix(4, "Ring", kDefaultBuffSize);
}

TEST_CASE("tree allreduce over 2 ranks matches the reference and agrees bitwise on every rank",
          "[allreduce][tree]") {
  runMatrix(2, "Tree", kDefaultBuffSize);
}

TEST_CASE("tree allreduce over 3 ranks matches the reference and agrees bitwise on every rank",
          "[allreduce][tree]") {
  runMatrix(3, "Tree", kDefaultBuffSize);
}

TEST_CASE("tree allreduce over 4 ranks on sockets matches the reference and agrees bitwise on every rank",
          "[allreduce][tree][sockets]") {
  runMatrix(4, "Tree", kDefaultBuffSize, IdMode::kEnvCommId, true);
}

TEST_CASE("ring allreduce over 2 ranks on sockets pipelines counts spanning many 8 KiB chunks",
          "[allreduce][ring][pipeline][sockets]") {
  runMatrix(2, "Ring", kSmallBuffSize, IdMode::kParent, true);
}

TEST_CASE("ring allreduce over 3 ranks pipelines counts spanning many 8 KiB chunks", "[allreduce][ring][pipeline]") {
  runMatrix(3, "Ring", kSmallBuffSize);
}

TEST_CASE("ring allreduce over 4 ranks pipelines counts spanning many 8 KiB chunks", "[allreduce][ring][pipeline]") {
  runMatrix(4, "Ring", kSmallBuffSize);
}

TEST_CASE("tree allreduce over 2 ranks pipelines counts spanning many 8 KiB chunks", "[allreduce][tree][pipeline]") {
  runMatrix(2, "Tree", kSmallBuffSize);
}

TEST_CASE("tree allreduce over 3 ranks on sockets pipelines counts spanning many 8 KiB chunks",
          "[allreduce][tree][pipeline][sockets]") {
  runMatrix(3, "Tree", kSmallBuffSize, IdMode::kParent, true);
}

TEST_CASE("tree allreduce over 4 ranks pipelines counts spanning many 8 KiB chunks", "[allreduce][tree][pipeline]") {
  runMatrix(4, "Tree", kSmallBuffSize);
}

TEST_CASE("without NCCL_ALGO allreduce over 3 ranks gives the one-shot's bits to 16 KiB, the tree's to 64 KiB and the ring's above",
          "[allreduce][ring][tree]") {
  // Float sums of thousands of rounded elements, so that the tree's and the ring's
  // orders differ somewhere in each case (checked below: otherwise the case would not
  // tell the algorithms apart).
  std::vector<Case> cases;
  uint64_t k = 0;
  for (ncclDataType_t t : {ncclBfloat16, ncclFloat16, ncclFloat32}) {
    const size_t size = typeInfo(t).size;
    for (size_t bytes : {size_t(16) << 10, size_t(64) << 10, size_t(72) << 10, size_t(256) << 10}) {
      const size_t count = bytes / size;
      cases.push_back({caseId(0xDEF, {uint64_t(t), bytes, k}), t, ncclSum, count, k % 2 == 1, 0, false});
      ++k;
    }
  }
  std::map<std::string, std::map<std::string, std::string>> hashes;  // algorithm -> case -> rank 0's hash
  for (const char* algo : {"Direct", "Tree", "Ring", static_cast<const char*>(nullptr)}) {
    if (testDeviceComms() && algo && std::string(algo) == "Direct") continue;  // host communicators only
    RunConfig config;
    config.nranks = 3;
    config.algo = algo;
    // The size rule comes from the cost model over the host's topology: pin it
    // to the shipped CI machine's, so the crossover does not move with the host.
    if (const char* dir = getenv("GYRE_TOPOLOGIES_DIR"))
      config.env.push_back({"NCCL_TOPO_FILE", std::string(dir) + "/ci_vm.xml"});
    RunResult result = runCases(config, cases);
    checkRun(config, result, cases.size(), true);
    if (!result.ranks.empty()) hashes[algo ? algo : "default"] = result.ranks[0].records;
  }
  for (const Case& c : cases) {
    const std::string key = describe(c);
    const std::string tree = hashes["Tree"][key], ring = hashes["Ring"][key], dflt = hashes["default"][key];
    const std::string direct = hashes["Direct"][key];
    // Device communicators on one host use the ring unless NCCL_ALGO forces
    // the tree (as NCCL: within a host the tree is a slower chain).
    const size_t bytes = c.count * typeInfo(c.type).size;
    const bool directExpected = !testDeviceComms() && bytes <= (16u << 10);
    const bool treeExpected = !testDeviceComms() && !directExpected && bytes <= (64u << 10);
    INFO(key << ": direct " << direct << ", tree " << tree << ", ring " << ring << ", default " << dflt);
    CHECK(tree != ring);
    // No check that direct != tree: on 3 ranks both reduce as (x0 + x1) + x2,
    // so their bits agree; the default's bits still must be the one-shot's.
    CHECK(dflt == (directExpected ? direct : treeExpected ? tree : ring));
  }
}

// Over sockets a step's payload leaves from, and lands in, the user's buffers
// (transport.h: PayloadPointers) from 4 KiB up. Recursive doubling (the
// default to 64 KiB on 2 and 4 ranks) sends x[i] and then overwrites x[i]
// with the reduced pair, so in place the write must wait for the send;
// the ring's last steps receive straight into the output.
TEST_CASE("without NCCL_ALGO allreduce over 2 and 4 ranks on sockets, payloads by pointer, matches the reference in "
          "place and out of place",
          "[allreduce][sockets][pointers]") {
  std::vector<Case> cases;
  uint64_t k = 0;
  for (ncclDataType_t t : allTypes()) {
    const size_t size = typeInfo(t).size;
    for (size_t bytes : {size_t(4) << 10, size_t(40) << 10, size_t(64) << 10, size_t(200) << 10})
      for (bool inPlace : {false, true}) {
        const size_t count = bytes / size + (k % 3);  // some not a multiple of the ranks or of 16 bytes
        const ncclRedOp_t op = builtinOps()[k % builtinOps().size()];
        cases.push_back({caseId(0xB7F, {uint64_t(t), bytes, k}), t, op, count, inPlace, 0, false});
        ++k;
      }
  }
  for (int nranks : {2, 4}) {
    RunConfig config;
    config.nranks = nranks;
    config.sockets = true;
    checkRun(config, runCases(config, cases), cases.size(), true);
  }
}

// NCCL_ALGO=Direct: one-shot AllReduce over the mesh (every rank sends its
// input to every rank and reduces all n in rank order), at every size.
TEST_CASE("direct (one-shot) allreduce over 3 ranks matches the reference and agrees bitwise on every rank",
          "[allreduce][direct]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  runMatrix(3, "Direct", kDefaultBuffSize);
}

TEST_CASE("direct (one-shot) allreduce over 4 ranks matches the reference and agrees bitwise on every rank",
          "[allreduce][direct]") {
  if (testDeviceComms()) return;
  runMatrix(4, "Direct", kDefaultBuffSize);
}

TEST_CASE("direct (one-shot) allreduce over 3 ranks on sockets pipelines counts spanning many 8 KiB chunks",
          "[allreduce][direct][pipeline][sockets]") {
  if (testDeviceComms()) return;
  runMatrix(3, "Direct", kSmallBuffSize, IdMode::kParent, true);
}

TEST_CASE("direct (one-shot) allreduce over 4 ranks pipelines counts spanning many 8 KiB chunks",
          "[allreduce][direct][pipeline]") {
  if (testDeviceComms()) return;
  runMatrix(4, "Direct", kSmallBuffSize);
}

// Without NCCL_ALGO (the tuner's picks: doubling, one-shot, tree, ring by
// size and rank count), every case twice in a row on fresh buffers: the
// second call reuses the first's plan and lanes (src/host/repeat_call.h).
TEST_CASE("allreduce over 1 to 4 ranks called twice per case, the second reusing the first's plan and lanes, matches "
          "the reference and agrees bitwise on every rank",
          "[allreduce][repeat]") {
  if (testDeviceComms()) return;  // the repeat path is the host executor's
  for (int nranks : {1, 2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, nullptr, kDefaultBuffSize, IdMode::kParent, false, 2);
  }
}

TEST_CASE("allreduce over 3 ranks called twice per case pipelines many 8 KiB chunks with reused lanes",
          "[allreduce][repeat][pipeline]") {
  if (testDeviceComms()) return;
  runMatrix(3, nullptr, kSmallBuffSize, IdMode::kParent, false, 2);
}

// The repeat path keys on the communicator's serial, not its address: a
// destroyed communicator's memory often holds the next one, whose
// connections are other objects. Each round splits a communicator of the
// same shape off the run's, repeats one AllReduce on it and destroys it.
TEST_CASE("a lone allreduce repeated on a new communicator of the same shape, the old one destroyed, runs over the "
          "new one's connections",
          "[allreduce][repeat]") {
  if (testDeviceComms()) return;
  for (int nranks : {2, 3}) {
    RunConfig config;
    config.nranks = nranks;
    RunResult result = runOnComm(config, [&](int rank, int n, ncclComm_t comm) {
      for (int round = 0; round < 4; ++round) {
        ncclComm_t sub = nullptr;
        ncclResult_t r = ncclCommSplit(comm, 0, rank, &sub, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: ncclCommSplit returned %d: %s", rank, int(r), lastError().c_str());
        for (int call = 0; call < 3; ++call) {
          float data[3] = {float(rank + round), float(call), 1.0f};
          r = ncclAllReduce(data, data, 3, ncclFloat32, ncclSum, sub, nullptr);
          RANK_CHECK(r == ncclSuccess, "rank %d: round %d call %d returned %d: %s", rank, round, call, int(r),
                     lastError().c_str());
          const float want0 = float(n * (n - 1) / 2 + n * round);
          RANK_CHECK(data[0] == want0 && data[1] == float(n * call) && data[2] == float(n),
                     "rank %d: round %d call %d: got %g %g %g, expected %g %g %g", rank, round, call, data[0],
                     data[1], data[2], want0, float(n * call), float(n));
        }
        r = ncclCommDestroy(sub);
        RANK_CHECK(r == ncclSuccess, "rank %d: ncclCommDestroy returned %d: %s", rank, int(r), lastError().c_str());
      }
      return 0;
    });
    checkRun(config, result, 12, false);
  }
}

// GYRE_SINGLE_COPY=always: every allreduce (but avg and PreMulSum, which
// keep the tuned algorithm) reduces each rank's block from the peers' inputs
// in place and reads the peers' results (build_single_copy.h): through
// process_vm_readv on heap buffers, through mappings on gyreMemAllocHost
// ones. Where the kernel forbids cross-memory attach these runs test the
// fallback to the tuned algorithms.
TEST_CASE("single-copy allreduce over 2, 3 and 4 ranks matches the reference and agrees bitwise on every rank",
          "[allreduce][singlecopy]") {
  if (testDeviceComms()) return;  // host communicators only
  for (int nranks : {2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, nullptr, kDefaultBuffSize, IdMode::kParent, false, 1, {{"GYRE_SINGLE_COPY", "always"}});
  }
}

TEST_CASE("single-copy allreduce over 2, 3 and 4 ranks on gyreMemAllocHost buffers matches the reference and "
          "agrees bitwise on every rank",
          "[allreduce][singlecopy][sharedbuffers]") {
  if (testDeviceComms()) return;
  for (int nranks : {2, 3, 4}) {
    INFO(nranks << " ranks");
    runMatrix(nranks, nullptr, kDefaultBuffSize, IdMode::kParent, false, 1,
              {{"GYRE_SINGLE_COPY", "always"}, {"GYRE_TEST_SHARED_BUFFERS", "1"}});
  }
}

TEST_CASE("single-copy allreduce over 3 ranks pipelines counts spanning many 8 KiB pieces, twice per case with "
          "reused lanes",
          "[allreduce][singlecopy][pipeline][repeat]") {
  if (testDeviceComms()) return;
  runMatrix(3, nullptr, kSmallBuffSize, IdMode::kParent, false, 2, {{"GYRE_SINGLE_COPY", "always"}});
  runMatrix(2, nullptr, kSmallBuffSize, IdMode::kParent, false, 1,
            {{"GYRE_SINGLE_COPY", "always"}, {"GYRE_TEST_SHARED_BUFFERS", "1"}});
}
