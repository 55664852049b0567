// Allreduce results on host communicators, checked against an independent reference
// (exact integers modulo 2^bits, long-double floats) over a matrix of rank counts,
// element counts, datatypes, ops and buffer placements. Any rank can regenerate every
// rank's input from its seed; one rank per case (rotating) does, and checks the whole
// result against the reference. The parent then compares every rank's result
// fingerprints for bitwise agreement, so the other ranks' results are checked too.
// (Every rank checking every case made the test quadratic in the rank count: with the
// 1- and 2-byte floats, 4 ranks on 2 cores spent most of their time making inputs.)
#include <catch2/catch.hpp>
#include <string.h>

#include <string>
#include <vector>

#include "../collectives/coll_common.h"
#include "../support/fork_ranks.h"
#include "../support/reference.h"

namespace {

using namespace gyre::test;

// Datatypes and ops under test: all twelve. The low-precision floats are checked
// with reference.h's tolerance, which scales with each type's epsilon.
const std::vector<ncclDataType_t> kTypes = {
    ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,     ncclInt64,     ncclUint64,
    ncclFloat16, ncclFloat32, ncclFloat64,  ncclBfloat16,   ncclFloat8e4m3, ncclFloat8e5m2,
};
const std::vector<ncclRedOp_t> kOps = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

// Every count in the full matrix; the larger ones are sampled (see buildCases).
const std::vector<size_t> kSmallCounts = {0, 1, 2, 7, 13, 64, 1021};
// 4099 is prime; 12293 is divisible by neither 2, 3, 4 nor any power-of-two chunk;
// 65537 is prime and spans many chunks when NCCL_BUFFSIZE is small.
const std::vector<size_t> kLargeCounts = {4099, 12293, 65537};

constexpr size_t kDefaultBuffSize = 4194304;  // NCCL_BUFFSIZE default; a step moves 1/8 of it
constexpr size_t kGuard = 64;                 // bytes checked on each side of recvbuff
constexpr unsigned char kGuardByte = 0xA5;
constexpr unsigned char kUnwrittenByte = 0x5A;

struct Case {
  uint64_t id;
  ncclDataType_t type;
  ncclRedOp_t op;
  size_t count;
  bool inPlace;
  bool misaligned;  // buffers start one element past malloc alignment
  bool repeat;      // call twice and require the same bits
};

std::string describe(const Case& c) {
  char buf[160];
  snprintf(buf, sizeof buf, "%s %s count %zu %s%s (case %llu)", typeInfo(c.type).name, opName(c.op),
           c.count, c.inPlace ? "in-place" : "out-of-place", c.misaligned ? " misaligned" : "",
           (unsigned long long)c.id);
  return buf;
}

// The full matrix at small counts; at large counts each (type, op) pair runs two of
// the counts, rotating so that every count meets every type and op somewhere, and
// each type also runs once at a count spanning 3.5 pipeline chunks (see below).
std::vector<Case> buildCases(size_t buffSize) {
  std::vector<Case> cases;
  uint64_t id = 0;
  size_t pair = 0;
  for (ncclDataType_t t : kTypes) {
    for (ncclRedOp_t op : kOps) {
      for (size_t count : kSmallCounts) {
        for (bool inPlace : {false, true}) {
          const bool misaligned = (id % 3) == 2;
          cases.push_back({id++, t, op, count, inPlace, misaligned, true});
        }
      }
      for (size_t k = 0; k < 2; ++k) {
        const size_t count = kLargeCounts[(pair + k) % kLargeCounts.size()];
        cases.push_back({id++, t, op, count, ((pair + k) % 2) == 1, (pair % 5) == 0, k == 0});
      }
      ++pair;
    }
    // 3.5 chunks of the default NCCL_BUFFSIZE are up to 1.8 million elements, which
    // for the 1- and 2-byte floats (inputs and reference in long double) took longer
    // than the rest of the matrix; they span many chunks in the NCCL_BUFFSIZE=65536
    // runs, and chunking is by bytes whatever the type.
    if (buffSize == kDefaultBuffSize && typeInfo(t).kind == Kind::kFloat && typeInfo(t).size < 4) continue;
    const size_t chunkBytes = buffSize / 8;
    const size_t manyChunks = (7 * chunkBytes / 2) / typeInfo(t).size + 3;
    ncclRedOp_t op = kOps[size_t(t) % kOps.size()];
    cases.push_back({id++, t, op, manyChunks, (size_t(t) % 2) == 0, false, false});
  }
  return cases;
}

// Runs one case on this rank; returns false if the communicator can no longer be used.
bool runCase(ncclComm_t comm, int rank, int nranks, const Case& c) {
  const TypeInfo& t = typeInfo(c.type);
  const size_t bytes = c.count * t.size;
  const std::string what = describe(c);

  const bool checker = c.id % uint64_t(nranks) == uint64_t(rank);
  std::vector<std::vector<char>> inputs(nranks);
  std::vector<const void*> inputPtrs;
  for (int r = 0; r < nranks; ++r) {
    if (!checker && r != rank) continue;
    // fillInput with a binary-search fp8 encoder (the reference's scans all 256 codes,
    // too slow for the millions of elements of the many-chunk cases).
    inputs[r].resize(bytes);
    coll::fillRankInput(c.type, c.op, nranks, c.id, r, inputs[r].data(), c.count);
    inputPtrs.push_back(inputs[r].data());
  }

  const size_t front = kGuard + (c.misaligned ? t.size : 0);
  std::vector<unsigned char> recvRegion(front + bytes + kGuard, kGuardByte);
  std::vector<unsigned char> sendRegion(front + bytes + kGuard, kGuardByte);
  unsigned char* recv = recvRegion.data() + front;
  unsigned char* send = sendRegion.data() + front;
  // A zero-count case has no input: memcpy from its NULL data() is undefined even for 0 bytes.
  if (bytes > 0) {
    memcpy(send, inputs[rank].data(), bytes);
    if (c.inPlace) memcpy(recv, inputs[rank].data(), bytes);
    else memset(recv, kUnwrittenByte, bytes);
  }

  auto call = [&](unsigned char* out) {
    const void* in = c.inPlace ? static_cast<const void*>(out) : send;
    ncclResult_t r = ncclAllReduce(in, out, c.count, c.type, c.op, comm, nullptr);
    if (r != ncclSuccess)
      rankFail("rank %d: %s: ncclAllReduce returned %d: %s", rank, what.c_str(), int(r),
               lastError().c_str());
    return r == ncclSuccess;
  };
  auto guardsIntact = [&](const std::vector<unsigned char>& region, const char* name) {
    for (size_t i = 0; i < front; ++i)
      if (region[i] != kGuardByte) {
        rankFail("rank %d: %s: %s guard byte %zd before the buffer was overwritten", rank,
                 what.c_str(), name, ssize_t(i) - ssize_t(front));
        return false;
      }
    for (size_t i = 0; i < kGuard; ++i)
      if (region[front + bytes + i] != kGuardByte) {
        rankFail("rank %d: %s: %s guard byte %zu past the end was overwritten", rank,
                 what.c_str(), name, i);
        return false;
      }
    return true;
  };

  rankProgress(what);
  if (!call(recv)) return false;
  guardsIntact(recvRegion, "recvbuff");
  if (!c.inPlace) {
    guardsIntact(sendRegion, "sendbuff");
    if (bytes > 0 && memcmp(send, inputs[rank].data(), bytes) != 0)
      rankFail("rank %d: %s: out-of-place call modified sendbuff", rank, what.c_str());
  }
  if (checker) {
    std::string wrong = compareToReference(t, c.op, inputPtrs, recv, c.count);
    if (!wrong.empty()) rankFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());
  }

  const uint64_t hash = fnv1a(recv, bytes);
  char hex[32];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
  rankRecord(what, hex);

  if (c.repeat) {
    std::vector<unsigned char> again(front + bytes + kGuard, kGuardByte);
    unsigned char* out = again.data() + front;
    if (c.inPlace && bytes > 0) memcpy(out, inputs[rank].data(), bytes);
    else memset(out, kUnwrittenByte, bytes);
    if (!call(out)) return false;
    if (memcmp(out, recv, bytes) != 0)
      rankFail("rank %d: %s: a repeated call gave different bits", rank, what.c_str());
  }
  return true;
}

int initHostComm(ncclComm_t* comm, int rank, int nranks, const ncclUniqueId& id) {
  ncclResult_t r = gyreCommInitRankHost(comm, nranks, id, rank, nullptr);
  RANK_CHECK(r == ncclSuccess, "rank %d: gyreCommInitRankHost returned %d: %s", rank, int(r),
             lastError().c_str());
  int count = -1, user = -1, isHost = -1;
  RANK_CHECK(ncclCommCount(*comm, &count) == ncclSuccess && count == nranks,
             "ncclCommCount gave %d", count);
  RANK_CHECK(ncclCommUserRank(*comm, &user) == ncclSuccess && user == rank,
             "ncclCommUserRank gave %d", user);
  RANK_CHECK(gyreCommIsHost(*comm, &isHost) == ncclSuccess && isHost == 1,
             "gyreCommIsHost gave %d", isHost);
  return 0;
}

// Runs the whole matrix on `nranks` forked ranks and checks it from the parent.
// `sockets`: NCCL_SHM_DISABLE=1 and NCCL_ALGO=Ring, so every case runs the ring over
// the socket transport (on 4 ranks an unforced AllReduce of at most 64 KiB would run
// recursive doubling, and a larger one the cost model's pick).
void runMatrix(int nranks, size_t buffSize, IdMode mode, bool sockets = false) {
  std::vector<Case> cases = buildCases(buffSize);
  // Repeated calls check that a schedule gives the same bits twice, which does not
  // depend on the transport; over sockets each call costs 2-3 ms on 4 ranks.
  if (sockets)
    for (Case& c : cases) c.repeat = false;
  RankOptions options;
  options.idMode = mode;
  options.timeout_s = 40;  // the matrix takes seconds; this is a backstop for a hang
  options.env = {{"GYRE_TIMEOUT", "5"}, {"GYRE_INIT_TIMEOUT", "10"}};
  if (buffSize != kDefaultBuffSize) options.env.push_back({"NCCL_BUFFSIZE", std::to_string(buffSize)});
  if (sockets) {
    options.env.push_back({"NCCL_SHM_DISABLE", "1"});
    options.env.push_back({"NCCL_ALGO", "Ring"});
  }

  RunResult result = runRanks(
      nranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        for (const Case& c : cases)
          if (!runCase(comm, rank, n, c)) return 1;
        ncclResult_t r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "ncclCommDestroy returned %d: %s", int(r), lastError().c_str());
        return 0;
      },
      options);
  INFO(cases.size() << " cases per rank, NCCL_BUFFSIZE=" << buffSize << ", " << result.elapsed_s << " s");
  INFO(result.describe());
  CHECK(result.allOk());
  const std::string mismatches = result.recordMismatches();
  INFO("results that differ between ranks:\n" << mismatches);
  CHECK(mismatches.empty());
}

// Runs `fn(rank, comm)` on an initialised host communicator on each of `nranks` ranks.
RunResult runOnComm(int nranks, const std::function<int(int, ncclComm_t)>& fn) {
  RankOptions options;
  options.timeout_s = 20;
  options.env = {{"GYRE_TIMEOUT", "5"}, {"GYRE_INIT_TIMEOUT", "10"}};
  return runRanks(
      nranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        int rc = fn(rank, comm);
        ncclResult_t r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "ncclCommDestroy returned %d: %s", int(r), lastError().c_str());
        return rc;
      },
      options);
}

}  // namespace

TEST_CASE("ring allreduce of 7 floats over 3 ranks equals the double-precision sum",
          "[allreduce]") {
  RunResult result = runOnComm(3, [](int rank, ncclComm_t comm) {
    float in[7], out[7];
    for (int i = 0; i < 7; ++i) in[i] = 0.1f * float(rank + 1) + 1e-3f * float(i);
    ncclResult_t r = ncclAllReduce(in, out, 7, ncclFloat32, ncclSum, comm, nullptr);
    RANK_CHECK(r == ncclSuccess, "ncclAllReduce returned %d: %s", int(r), lastError().c_str());
    for (int i = 0; i < 7; ++i) {
      double want = 0;
      for (int q = 0; q < 3; ++q) want += double(0.1f * float(q + 1) + 1e-3f * float(i));
      RANK_CHECK(std::fabs(double(out[i]) - want) <= 4 * 3 * FLT_EPSILON * want,
                 "element %d: got %.9g, want %.9g", i, double(out[i]), want);
    }
    return 0;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("int32 sum over 4 ranks wraps modulo 2^32 instead of saturating", "[allreduce]") {
  RunResult result = runOnComm(4, [](int rank, ncclComm_t comm) {
    int32_t in[3] = {INT32_MAX, INT32_MIN, rank == 0 ? -1 : 1};
    int32_t out[3] = {0, 0, 0};
    ncclResult_t r = ncclAllReduce(in, out, 3, ncclInt32, ncclSum, comm, nullptr);
    RANK_CHECK(r == ncclSuccess, "ncclAllReduce returned %d: %s", int(r), lastError().c_str());
    // 4·(2^31−1) = 2^33 − 4 ≡ −4;  4·(−2^31) = −2^33 ≡ 0;  −1 + 1 + 1 + 1 = 2.
    RANK_CHECK(out[0] == -4 && out[1] == 0 && out[2] == 2, "got %d %d %d, want -4 0 2", out[0],
               out[1], out[2]);
    return 0;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("integer average over 3 ranks divides the exact sum and rounds toward zero",
          "[allreduce]") {
  RunResult result = runOnComm(3, [](int rank, ncclComm_t comm) {
    // Sums −2, 2, −15, 7, 0 → averages 0, 0, −5, 2, 0 (C division truncates).
    const int64_t in[3][5] = {{-1, 1, -5, 7, 5}, {-1, 1, -5, 0, -5}, {0, 0, -5, 0, 0}};
    const int64_t want[5] = {0, 0, -5, 2, 0};
    int64_t out[5];
    ncclResult_t r = ncclAllReduce(in[rank], out, 5, ncclInt64, ncclAvg, comm, nullptr);
    RANK_CHECK(r == ncclSuccess, "ncclAllReduce returned %d: %s", int(r), lastError().c_str());
    for (int i = 0; i < 5; ++i)
      RANK_CHECK(out[i] == want[i], "element %d: got %lld, want %lld", i, (long long)out[i],
                 (long long)want[i]);
    int32_t in32 = rank == 2 ? -2 : -1, out32 = 1;  // sum −4 → −1 (floor would give −2)
    r = ncclAllReduce(&in32, &out32, 1, ncclInt32, ncclAvg, comm, nullptr);
    RANK_CHECK(r == ncclSuccess, "ncclAllReduce returned %d: %s", int(r), lastError().c_str());
    RANK_CHECK(out32 == -1, "int32 avg of -1,-1,-2: got %d, want -1", out32);
    return 0;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("allreduce on 1 rank copies the input for every type, op and count", "[allreduce][matrix]") {
  runMatrix(1, kDefaultBuffSize, IdMode::kParent);
}

TEST_CASE("allreduce over 2 ranks matches the exact-integer and long-double reference",
          "[allreduce][matrix]") {
  runMatrix(2, kDefaultBuffSize, IdMode::kParent);
}

TEST_CASE("allreduce over 3 ranks joined through NCCL_COMM_ID matches the reference",
          "[allreduce][matrix]") {
  runMatrix(3, kDefaultBuffSize, IdMode::kEnvCommId);
}

TEST_CASE("allreduce over 4 ranks matches the reference and is bitwise identical on every rank",
          "[allreduce][matrix]") {
  runMatrix(4, kDefaultBuffSize, IdMode::kParent);
}

TEST_CASE("allreduce over 2 ranks with NCCL_BUFFSIZE=65536 pipelines many chunks correctly",
          "[allreduce][matrix][pipeline]") {
  runMatrix(2, 65536, IdMode::kEnvCommId);
}

TEST_CASE("allreduce over 3 ranks with NCCL_BUFFSIZE=65536 pipelines many chunks correctly",
          "[allreduce][matrix][pipeline]") {
  runMatrix(3, 65536, IdMode::kParent);
}

TEST_CASE("allreduce over 4 ranks with NCCL_BUFFSIZE=65536 pipelines many chunks correctly",
          "[allreduce][matrix][pipeline]") {
  runMatrix(4, 65536, IdMode::kEnvCommId);
}

// Hidden from the default run: meson registers it as its own test,
// allreduce_correctness_sockets (the binary run with the tag as argument).
TEST_CASE("ring allreduce over 4 ranks on sockets matches the reference and is bitwise identical on every rank",
          "[.][sockets][allreduce][matrix]") {
  runMatrix(4, kDefaultBuffSize, IdMode::kParent, true);
}
