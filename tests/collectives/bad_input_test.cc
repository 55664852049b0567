// Over 500 lines on purpose: one binary (one fork of ranks per case) keeps
// every kind of bad input in one list a reader can check against the API.
// Bad input to the collectives gives a clear error, never a crash or a hang: arguments
// a rank can check alone (root, peer, overlapping buffers, PreMulSum ops used with
// another datatype or after destroy, datatype, stream) fail the call with
// ncclInvalidArgument and a message naming the argument, and leave the communicator
// usable; a send whose receiver never posts the receive fails by GYRE_TIMEOUT naming
// the peer; collectives and sends/receives whose ranks disagree on the count or
// datatype fail at once with a "mismatched" error naming both ranks. Gather and
// Scatter buffers must be in place (NCCL's layout) or disjoint at the root.
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "../support/shared_flags.h"

#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

// Checks that `r` is ncclInvalidArgument with an error text containing `word`.
void expectInvalid(ncclResult_t r, const char* word, int rank, const char* call) {
  const std::string text = lastError();
  if (r != ncclInvalidArgument)
    caseFail("rank %d: %s returned %d (%s), expected ncclInvalidArgument; last error: %s", rank, call, int(r),
             ncclGetErrorString(r), text.c_str());
  else if (!containsNoCase(text, word))
    caseFail("rank %d: %s: the error does not mention \"%s\": %s", rank, call, word, text.c_str());
}

// A valid allreduce, to show the communicator still works after rejected calls.
bool stillWorks(ncclComm_t comm, int rank, int nranks, const char* after) {
  const Inputs in = makeInputs(typeInfo(ncclInt32), ncclSum, nranks, caseId(0xBAD, {uint64_t(nranks)}), 33);
  std::vector<int32_t> out(33);
  const std::string what = std::string("a valid allreduce after ") + after;
  if (!callOk(ncclAllReduce(in.rank(rank), out.data(), 33, ncclInt32, ncclSum, comm, nullptr), rank, what,
              "ncclAllReduce"))
    return false;
  std::string wrong = compareToReference(typeInfo(ncclInt32), ncclSum, in.at(0, 4), out.data(), 33);
  if (!wrong.empty()) caseFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());
  return true;
}

RunResult runLocalChecks(int nranks, const CommFn& fn) {
  RunConfig config;
  config.nranks = nranks;
  config.timeout_s = 30;
  return runOnComm(config, fn);
}

// ---- Runs where the communicator fails -------------------------------------------------

constexpr int kTimeoutSeconds = 3;
constexpr size_t kUnmatchedBytes = 48u << 20;

// Each rank runs fn, which returns how its call (expected to fail) ended; then it marks
// itself done, waits for the others, and aborts its communicator. The parent gets each
// rank's result code, error text and seconds in the call as records.
struct FailOutcome {
  ncclResult_t result = ncclSuccess;
  std::string error;
  double seconds = 0;
};
using FailFn = std::function<FailOutcome(int rank, int nranks, ncclComm_t comm)>;

using EnvList = std::vector<std::pair<std::string, std::optional<std::string>>>;

// `extraEnv` is set after the defaults, so it may override them.
RunResult runFailing(int nranks, const char* algo, const FailFn& fn, bool sockets = false,
                     const char* singleCopy = nullptr, const char* proto = nullptr, const EnvList& extraEnv = {}) {
  SharedFlags flags;
  RankOptions options;
  options.timeout_s = 40;
  options.env = {{"GYRE_TIMEOUT", std::to_string(kTimeoutSeconds)},
                 {"GYRE_INIT_TIMEOUT", "10"},
                 {"NCCL_BUFFSIZE", std::to_string(kSmallBuffSize)},
                 {"NCCL_ALGO", algo ? std::optional<std::string>(algo) : std::nullopt},
                 {"NCCL_SHM_DISABLE", sockets ? std::optional<std::string>("1") : std::nullopt},
                 {"GYRE_SINGLE_COPY", singleCopy ? std::optional<std::string>(singleCopy) : std::nullopt},
                 {"NCCL_PROTO", proto ? std::optional<std::string>(proto) : std::nullopt}};
  options.env.insert(options.env.end(), extraEnv.begin(), extraEnv.end());
  if (!flags.ok()) {
    RunResult r;
    r.setupError = "mmap of the shared flags failed";
    return r;
  }
  return runRanks(
      nranks,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        rankProgress("in the call expected to fail");
        FailOutcome o = fn(rank, n, comm);
        rankRecord("result", std::to_string(int(o.result)));
        rankRecord("error", o.error);
        rankRecord("seconds", std::to_string(o.seconds));
        flags.markDone(rank);
        rankProgress("waiting for the other ranks");
        for (int r = 0; r < n; ++r)
          RANK_CHECK(flags.waitDone(r, 4 * kTimeoutSeconds + 10), "rank %d: rank %d never finished its call", rank, r);
        ncclCommAbort(comm);
        return 0;
      },
      options);
}

FailOutcome timed(const std::function<ncclResult_t()>& call) {
  FailOutcome o;
  const double start = monotonicSeconds();
  o.result = call();
  o.seconds = monotonicSeconds() - start;
  o.error = o.result == ncclSuccess ? "" : lastError();
  return o;
}

// One call whose arguments differ between ranks, on 64 KiB buffers.
using MismatchedCall =
    std::function<ncclResult_t(int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out)>;

// Runs `call` on every rank and records how it ended and how long it took.
RunResult runMismatched(int nranks, const char* algo, const MismatchedCall& call, bool sockets) {
  return runFailing(
      nranks, algo,
      [&](int rank, int, ncclComm_t comm) {
        std::vector<char> in(64 << 10, 1), out(64 << 10);
        return timed([&] { return call(rank, comm, in, out); });
      },
      sockets);
}

std::string record(const RankOutcome& r, const char* key) {
  auto it = r.records.find(key);
  return it == r.records.end() ? "" : it->second;
}

}  // namespace

TEST_CASE("a root outside 0..nranks-1 is rejected with an error naming the root", "[badinput]") {
  RunResult result = runLocalChecks(2, [](int rank, int n, ncclComm_t comm) {
    float buf[8] = {}, big[16] = {};
    expectInvalid(ncclBroadcast(buf, buf, 8, ncclFloat32, -1, comm, nullptr), "root", rank, "ncclBroadcast(root -1)");
    expectInvalid(ncclBroadcast(buf, big, 8, ncclFloat32, n, comm, nullptr), "root", rank, "ncclBroadcast(root n)");
    expectInvalid(ncclBcast(buf, 8, ncclFloat32, n + 5, comm, nullptr), "root", rank, "ncclBcast(root n+5)");
    expectInvalid(ncclReduce(buf, big, 8, ncclFloat32, ncclSum, -1, comm, nullptr), "root", rank,
                  "ncclReduce(root -1)");
    expectInvalid(ncclReduce(buf, big, 8, ncclFloat32, ncclMax, n, comm, nullptr), "root", rank, "ncclReduce(root n)");
    expectInvalid(ncclGather(buf, big, 8, ncclFloat32, n, comm, nullptr), "root", rank, "ncclGather(root n)");
    expectInvalid(ncclScatter(big, buf, 8, ncclFloat32, -1, comm, nullptr), "root", rank, "ncclScatter(root -1)");
    return stillWorks(comm, rank, n, "bad roots") ? 0 : 1;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a peer outside 0..nranks-1 is rejected, inside a group too, and the next group still works",
          "[badinput][p2p]") {
  RunResult result = runLocalChecks(2, [](int rank, int n, ncclComm_t comm) {
    int32_t buf[16] = {}, got[16] = {};
    expectInvalid(ncclSend(buf, 16, ncclInt32, -1, comm, nullptr), "peer", rank, "ncclSend(peer -1)");
    expectInvalid(ncclSend(buf, 16, ncclInt32, n, comm, nullptr), "peer", rank, "ncclSend(peer n)");
    expectInvalid(ncclRecv(buf, 16, ncclInt32, n + 1, comm, nullptr), "peer", rank, "ncclRecv(peer n+1)");

    RANK_CHECK(ncclGroupStart() == ncclSuccess, "ncclGroupStart failed: %s", lastError().c_str());
    expectInvalid(ncclSend(buf, 16, ncclInt32, n, comm, nullptr), "peer", rank, "ncclSend(peer n) in a group");
    ncclResult_t end = ncclGroupEnd();
    if (end == ncclSuccess) caseFail("rank %d: ncclGroupEnd succeeded after a call in the group was rejected", rank);

    // A valid ring exchange right after: the failed group left nothing behind.
    for (int i = 0; i < 16; ++i) buf[i] = 100 * rank + i;
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "ncclGroupStart failed: %s", lastError().c_str());
    ncclResult_t s = ncclSend(buf, 16, ncclInt32, (rank + 1) % n, comm, nullptr);
    ncclResult_t r = ncclRecv(got, 16, ncclInt32, (rank + n - 1) % n, comm, nullptr);
    end = ncclGroupEnd();
    RANK_CHECK(s == ncclSuccess && r == ncclSuccess && end == ncclSuccess,
               "rank %d: a valid group after the failed one returned %d/%d/%d: %s", rank, int(s), int(r), int(end),
               lastError().c_str());
    for (int i = 0; i < 16; ++i)
      RANK_CHECK(got[i] == 100 * ((rank + n - 1) % n) + i, "rank %d: element %d: got %d", rank, i, got[i]);
    return stillWorks(comm, rank, n, "bad peers") ? 0 : 1;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("send and receive buffers that overlap without being in place are rejected as overlapping",
          "[badinput]") {
  RunResult result = runLocalChecks(2, [](int rank, int n, ncclComm_t comm) {
    const size_t count = 64;
    std::vector<float> a(count * size_t(n) * 2 + 8);
    float* base = a.data();
    expectInvalid(ncclAllReduce(base, base + 1, count, ncclFloat32, ncclSum, comm, nullptr), "overlap", rank,
                  "ncclAllReduce(recvbuff = sendbuff + 1)");
    expectInvalid(ncclAllReduce(base + count - 1, base, count, ncclFloat32, ncclSum, comm, nullptr), "overlap", rank,
                  "ncclAllReduce(sendbuff = recvbuff + count - 1)");
    // AllGather in place is sendbuff == recvbuff + rank*count; a block off by part of a
    // block overlaps. (sendbuff == recvbuff on a rank other than 0: the next test.)
    expectInvalid(ncclAllGather(base + size_t(rank) * count + count / 2, base, count, ncclFloat32, comm, nullptr),
                  "overlap", rank, "ncclAllGather(sendbuff half a block past this rank's)");
    expectInvalid(ncclAllGather(base + size_t(rank) * count + 1, base, count, ncclFloat32, comm, nullptr), "overlap",
                  rank, "ncclAllGather(sendbuff one element past this rank's block)");
    expectInvalid(ncclReduceScatter(base, base + size_t(rank) * count + 3, count, ncclFloat32, ncclSum, comm, nullptr),
                  "overlap", rank, "ncclReduceScatter(recvbuff three elements past this rank's block of sendbuff)");
    expectInvalid(ncclAlltoAll(base, base + 2, count, ncclFloat32, comm, nullptr), "overlap", rank,
                  "ncclAlltoAll(recvbuff = sendbuff + 2)");
    // Broadcast and Reduce check the buffers only where both are used: at the root,
    // so only the root makes these calls (a non-root would enter the collective alone).
    if (rank == 0) {
      expectInvalid(ncclBroadcast(base + 5, base, count, ncclFloat32, 0, comm, nullptr), "overlap", rank,
                    "ncclBroadcast at the root (recvbuff = sendbuff - 5)");
      expectInvalid(ncclReduce(base, base + 7, count, ncclFloat32, ncclSum, 0, comm, nullptr), "overlap", rank,
                    "ncclReduce at the root (recvbuff = sendbuff + 7)");
    }
    return stillWorks(comm, rank, n, "overlapping buffers") ? 0 : 1;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("allgather and reducescatter with sendbuff equal to recvbuff on rank 1 are rejected as overlapping",
          "[badinput]") {
  // On rank 1 in place means sendbuff == recvbuff + count (allgather) or recvbuff ==
  // sendbuff + count (reducescatter); the same pointer for both is block 0, which
  // overlaps without being in place. Only rank 1 calls: if the call were accepted it
  // would wait alone and fail by GYRE_TIMEOUT instead. One run per collective, since an
  // accepted call breaks the communicator.
  for (const char* coll : {"ncclAllGather", "ncclReduceScatter"}) {
    const bool gather = coll[4] == 'A';
    RunResult result = runFailing(2, nullptr, [gather](int rank, int, ncclComm_t comm) {
      if (rank != 1) return FailOutcome{};
      std::vector<float> a(2 * 64);
      return timed([&] {
        return gather ? ncclAllGather(a.data(), a.data(), 64, ncclFloat32, comm, nullptr)
                      : ncclReduceScatter(a.data(), a.data(), 64, ncclFloat32, ncclSum, comm, nullptr);
      });
    });
    INFO(coll << "(sendbuff == recvbuff) on rank 1 of 2");
    INFO(result.describe());
    REQUIRE(result.allOk());
    REQUIRE(result.ranks.size() == 2);
    const RankOutcome& r1 = result.ranks[1];
    INFO("rank 1: result " << record(r1, "result") << " after " << record(r1, "seconds") << " s: "
                           << record(r1, "error"));
    CHECK(record(r1, "result") == std::to_string(int(ncclInvalidArgument)));
    CHECK(containsNoCase(record(r1, "error"), "overlap"));
  }
}

TEST_CASE("gather and scatter buffers that overlap at the root without being in place are rejected, naming both",
          "[badinput][p2p]") {
  // Root 1 of 2: in place is Gather's sendbuff == recvbuff + count, Scatter's recvbuff
  // == sendbuff + count, so the same pointer for both (block 0) is a partial overlap.
  // Only the root makes the rejected calls (a non-root would enter the exchange
  // alone); then both ranks run each in place, whose bits must be right.
  RunResult result = runLocalChecks(2, [](int rank, int n, ncclComm_t comm) {
    const size_t count = 64, root = 1;
    std::vector<float> a(count * size_t(n) * 3);
    float* base = a.data() + count;  // room before it for a buffer starting below
    auto rejected = [&](ncclResult_t r, const char* call) {
      expectInvalid(r, "overlap", rank, call);
      const std::string text = lastError();
      if (r == ncclInvalidArgument && !(containsWord(text, "sendbuff") && containsWord(text, "recvbuff")))
        caseFail("rank %d: %s: the error does not name sendbuff and recvbuff: %s", rank, call, text.c_str());
    };
    if (size_t(rank) == root) {
      rejected(ncclGather(base, base, count, ncclFloat32, int(root), comm, nullptr),
               "ncclGather at root 1 (sendbuff == recvbuff)");
      rejected(ncclGather(base + count + 1, base, count, ncclFloat32, int(root), comm, nullptr),
               "ncclGather at root 1 (sendbuff one element past its block)");
      rejected(ncclGather(base + 2 * count - 1, base, count, ncclFloat32, int(root), comm, nullptr),
               "ncclGather at root 1 (sendbuff over the last element of recvbuff)");
      rejected(ncclGather(base - count / 2, base, count, ncclFloat32, int(root), comm, nullptr),
               "ncclGather at root 1 (sendbuff ending inside block 0)");
      rejected(ncclScatter(base, base, count, ncclFloat32, int(root), comm, nullptr),
               "ncclScatter at root 1 (recvbuff == sendbuff)");
      rejected(ncclScatter(base, base + count + 3, count, ncclFloat32, int(root), comm, nullptr),
               "ncclScatter at root 1 (recvbuff three elements past its block)");
      rejected(ncclScatter(base + count / 2, base, count, ncclFloat32, int(root), comm, nullptr),
               "ncclScatter at root 1 (sendbuff starting inside recvbuff)");
    }
    // In place at the root: its own block is already where it belongs.
    std::vector<float> mine(count), all(count * size_t(n), -1.0f);
    for (size_t i = 0; i < count; ++i) mine[i] = float(1000 * rank + int(i));
    float* block = all.data() + root * count;
    if (size_t(rank) == root) std::copy(mine.begin(), mine.end(), block);
    const float* gatherSend = size_t(rank) == root ? block : mine.data();
    RANK_CHECK(ncclGather(gatherSend, all.data(), count, ncclFloat32, int(root), comm, nullptr) == ncclSuccess,
               "rank %d: in-place ncclGather at root 1 failed: %s", rank, lastError().c_str());
    if (size_t(rank) == root)
      for (size_t i = 0; i < all.size(); ++i)
        RANK_CHECK(all[i] == float(1000 * int(i / count) + int(i % count)), "rank %d: in-place gather: [%zu] = %g",
                   rank, i, double(all[i]));
    // Scatter back what was gathered: rank p receives block p, the root's stays put.
    std::vector<float> got(count, -1.0f);
    float* scatterRecv = size_t(rank) == root ? block : got.data();
    RANK_CHECK(ncclScatter(all.data(), scatterRecv, count, ncclFloat32, int(root), comm, nullptr) == ncclSuccess,
               "rank %d: in-place ncclScatter at root 1 failed: %s", rank, lastError().c_str());
    for (size_t i = 0; i < count; ++i)
      RANK_CHECK(scatterRecv[i] == mine[i], "rank %d: in-place scatter: [%zu] = %g, want %g", rank, i,
                 double(scatterRecv[i]), double(mine[i]));
    return stillWorks(comm, rank, n, "overlapping gather and scatter buffers") ? 0 : 1;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("NCCL_CHECKS_DISABLE=1 lets gather and scatter buffers overlap at the root", "[badinput][p2p][checks]") {
  for (bool disabled : {false, true}) {
    RunConfig config;
    config.nranks = 1;
    config.timeout_s = 30;
    config.env = {{"NCCL_CHECKS_DISABLE", disabled ? std::optional<std::string>("1") : std::nullopt}};
    RunResult result = runOnComm(config, [disabled](int rank, int, ncclComm_t comm) {
      float a[9] = {};
      const ncclResult_t g = ncclGather(a + 1, a, 8, ncclFloat32, 0, comm, nullptr);
      const ncclResult_t s = ncclScatter(a, a + 1, 8, ncclFloat32, 0, comm, nullptr);
      if (disabled) {
        RANK_CHECK(g == ncclSuccess && s == ncclSuccess, "rank %d: with checks disabled gather/scatter returned "
                   "%d/%d: %s", rank, int(g), int(s), lastError().c_str());
      } else {
        expectInvalid(g, "overlap", rank, "ncclGather(sendbuff = recvbuff + 1) on 1 rank");
        expectInvalid(s, "overlap", rank, "ncclScatter(recvbuff = sendbuff + 1) on 1 rank");
      }
      return 0;
    });
    INFO("NCCL_CHECKS_DISABLE=" << (disabled ? "1" : "(unset)"));
    INFO(result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("a premulsum op used with another datatype, after destroy or never made is rejected as a bad op",
          "[badinput][premulsum]") {
  RunResult result = runLocalChecks(2, [](int rank, int n, ncclComm_t comm) {
    float scalar = 2.0f;
    double in[8] = {}, out[8] = {};
    float fin[8] = {}, fout[8] = {};
    ncclRedOp_t op;
    RANK_CHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm) == ncclSuccess,
               "ncclRedOpCreatePreMulSum failed: %s", lastError().c_str());
    expectInvalid(ncclAllReduce(in, out, 8, ncclFloat64, op, comm, nullptr), "op", rank,
                  "ncclAllReduce(float32 premulsum op on float64)");
    expectInvalid(ncclReduceScatter(in, out, 4 / n, ncclFloat64, op, comm, nullptr), "op", rank,
                  "ncclReduceScatter(float32 premulsum op on float64)");
    expectInvalid(ncclReduce(in, out, 8, ncclFloat64, op, 0, comm, nullptr), "op", rank,
                  "ncclReduce(float32 premulsum op on float64)");
    // The op still works with its own type.
    for (int i = 0; i < 8; ++i) fin[i] = float(rank + i);
    RANK_CHECK(ncclAllReduce(fin, fout, 8, ncclFloat32, op, comm, nullptr) == ncclSuccess,
               "the op with its own datatype failed: %s", lastError().c_str());
    for (int i = 0; i < 8; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += 2.0f * float(r + i);
      RANK_CHECK(fout[i] == want, "rank %d: element %d: got %g, want %g", rank, i, double(fout[i]), double(want));
    }
    RANK_CHECK(ncclRedOpDestroy(op, comm) == ncclSuccess, "ncclRedOpDestroy failed: %s", lastError().c_str());
    expectInvalid(ncclAllReduce(fin, fout, 8, ncclFloat32, op, comm, nullptr), "op", rank,
                  "ncclAllReduce(destroyed premulsum op)");
    if (ncclRedOpDestroy(op, comm) == ncclSuccess) caseFail("rank %d: destroying an op twice succeeded", rank);
    if (ncclRedOpDestroy(ncclSum, comm) == ncclSuccess) caseFail("rank %d: destroying ncclSum succeeded", rank);
    expectInvalid(ncclAllReduce(fin, fout, 8, ncclFloat32, static_cast<ncclRedOp_t>(ncclNumOps + 40), comm, nullptr),
                  "op", rank, "ncclAllReduce(an op number never made)");
    expectInvalid(ncclAllReduce(fin, fout, 8, ncclFloat32, static_cast<ncclRedOp_t>(-1), comm, nullptr), "op", rank,
                  "ncclAllReduce(op -1)");
    expectInvalid(ncclAllReduce(fin, fout, 8, static_cast<ncclDataType_t>(ncclNumTypes), ncclSum, comm, nullptr),
                  "datatype", rank, "ncclAllReduce(datatype ncclNumTypes)");
    if (!testDeviceComms())  // a device communicator takes any stream
      expectInvalid(ncclAllReduce(fin, fout, 8, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(0x1000)),
                    "stream", rank, "ncclAllReduce(non-NULL stream on a host communicator)");
    return stillWorks(comm, rank, n, "bad ops") ? 0 : 1;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a grouped send that its receiver never matches fails by GYRE_TIMEOUT naming the peer rank",
          "[badinput][p2p]") {
  // Rank 0 sends two 48 MiB messages to rank 1, rank 1 receives only the first. The
  // second can never drain: it is far more than the receiver's FIFO (NCCL_BUFFSIZE)
  // and the sockets between them can hold. (A message that fits in that buffering may
  // complete without a receiver, as an NCCL send of at most NCCL_BUFFSIZE can.)
  const size_t count = kUnmatchedBytes / 4;
  for (bool sockets : {false, true}) {
    RunResult result = runFailing(
        2, nullptr,
        [count](int rank, int, ncclComm_t comm) {
          std::vector<float> a(count, float(rank)), b(count, 1.0f);
          if (rank == 0)
            return timed([&] {
              ncclGroupStart();
              ncclSend(a.data(), count, ncclFloat32, 1, comm, nullptr);
              ncclSend(b.data(), count, ncclFloat32, 1, comm, nullptr);
              return ncclGroupEnd();
            });
          return timed([&] {  // its own receive is matched, so this group may well succeed
            ncclGroupStart();
            ncclRecv(a.data(), count, ncclFloat32, 0, comm, nullptr);
            return ncclGroupEnd();
          });
        },
        sockets);
    INFO((sockets ? "NCCL_SHM_DISABLE=1" : "default transport"));
    INFO(result.describe());
    REQUIRE(result.allOk());
    REQUIRE(result.ranks.size() == 2);
    const RankOutcome& sender = result.ranks[0];
    const std::string error = record(sender, "error");
    const double seconds = std::stod(record(sender, "seconds"));
    INFO("rank 0: result " << record(sender, "result") << " after " << seconds << " s: " << error);
    const std::string code = record(sender, "result");
    CHECK((code == std::to_string(int(ncclRemoteError)) || code == std::to_string(int(ncclSystemError))));
    CHECK(containsWord(error, "rank 1"));
    CHECK(seconds >= kTimeoutSeconds - 0.5);
    CHECK(seconds < kTimeoutSeconds + 6);
  }
}

TEST_CASE("a grouped receive whose sender never sends fails by GYRE_TIMEOUT naming the peer rank",
          "[badinput][p2p]") {
  RunResult result = runFailing(3, nullptr, [](int rank, int, ncclComm_t comm) {
    std::vector<int64_t> buf(1000, rank);
    if (rank == 2)
      return timed([&] {
        ncclGroupStart();
        ncclRecv(buf.data(), buf.size(), ncclInt64, 1, comm, nullptr);
        return ncclGroupEnd();
      });
    return FailOutcome{};  // ranks 0 and 1 post nothing
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  REQUIRE(result.ranks.size() == 3);
  const RankOutcome& receiver = result.ranks[2];
  const std::string error = record(receiver, "error");
  const double seconds = std::stod(record(receiver, "seconds"));
  INFO("rank 2: result " << record(receiver, "result") << " after " << seconds << " s: " << error);
  // A peer that never joins shows up while connecting (ncclSystemError) or while
  // waiting for data (ncclRemoteError); either way the call fails and names it.
  const std::string code = record(receiver, "result");
  CHECK((code == std::to_string(int(ncclRemoteError)) || code == std::to_string(int(ncclSystemError))));
  CHECK(containsWord(error, "rank 1"));
  CHECK(seconds >= kTimeoutSeconds - 0.5);
  CHECK(seconds < kTimeoutSeconds + 6);
}

// A repeated call reuses what the executor derived from its lanes
// (runLanes' lane-set id); the timeout is not among it.
TEST_CASE("a repeated allreduce whose peer stays away times out after the gyreCommSetTimeout set since the last call",
          "[badinput][repeat]") {
  RunResult result = runFailing(2, nullptr, [](int rank, int, ncclComm_t comm) {
    std::vector<float> buf(5, 1.0f);
    for (int i = 0; i < 2; ++i) {  // the second call repeats the first
      FailOutcome o =
          timed([&] { return ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr); });
      if (o.result != ncclSuccess) return o;
    }
    if (rank == 1) return FailOutcome{};  // rank 1 makes no third call
    if (gyreCommSetTimeout(comm, 1) != ncclSuccess) return FailOutcome{ncclInternalError, "gyreCommSetTimeout failed", 0};
    return timed([&] { return ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr); });
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  REQUIRE(result.ranks.size() == 2);
  CHECK(record(result.ranks[1], "result") == std::to_string(int(ncclSuccess)));
  const RankOutcome& waiter = result.ranks[0];
  const double seconds = std::stod(record(waiter, "seconds"));
  INFO("rank 0: result " << record(waiter, "result") << " after " << seconds << " s: " << record(waiter, "error"));
  CHECK(record(waiter, "result") == std::to_string(int(ncclRemoteError)));
  CHECK(containsWord(record(waiter, "error"), "rank 1"));
  CHECK(seconds >= 0.5);
  CHECK(seconds < kTimeoutSeconds - 0.5);  // the new 1 s, not GYRE_TIMEOUT's 3 s
}

TEST_CASE("the error for an unmatched send names both the sending and the receiving rank", "[badinput][p2p]") {
  // The issue asks the unmatched-send error to name both ranks of the pair.
  const size_t count = kUnmatchedBytes / 4;
  RunResult result = runFailing(2, nullptr, [count](int rank, int, ncclComm_t comm) {
    std::vector<float> a(count, 1.0f);
    if (rank == 1)
      return timed([&] {
        ncclGroupStart();
        ncclSend(a.data(), count, ncclFloat32, 0, comm, nullptr);
        return ncclGroupEnd();
      });
    return FailOutcome{};
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  REQUIRE(result.ranks.size() == 2);
  const std::string error = record(result.ranks[1], "error");
  INFO("rank 1 (the sender): result " << record(result.ranks[1], "result") << ": " << error);
  CHECK(record(result.ranks[1], "result") != std::to_string(int(ncclSuccess)));
  CHECK(containsWord(error, "rank 0"));
  CHECK(containsWord(error, "rank 1"));
}

TEST_CASE("allreduce with a different count on each of 2 ranks fails on both with a mismatched error",
          "[badinput][mismatch]") {
  for (int run = 0; run < 4; ++run) {
    const char* algo = run % 2 ? "Tree" : "Ring";
    const bool sockets = run >= 2;
    RunResult result = runFailing(
        2, algo,
        [](int rank, int, ncclComm_t comm) {
          std::vector<float> in(2000, 1.0f), out(2000);
          return timed([&] {
            return ncclAllReduce(in.data(), out.data(), rank == 0 ? 1000 : 1001, ncclFloat32, ncclSum, comm,
                                 nullptr);
          });
        },
        sockets);
    INFO("NCCL_ALGO=" << algo << (sockets ? ", NCCL_SHM_DISABLE=1" : ""));
    INFO(result.describe());
    REQUIRE(result.allOk());
    for (const RankOutcome& r : result.ranks) {
      INFO("rank " << r.rank << ": result " << record(r, "result") << " after " << record(r, "seconds")
                   << " s: " << record(r, "error"));
      CHECK(record(r, "result") != std::to_string(int(ncclSuccess)));
      CHECK(containsNoCase(record(r, "error"), "mismatched"));
      CHECK(std::stod(record(r, "seconds")) < kTimeoutSeconds + 6);
    }
  }
}

TEST_CASE("collectives whose ranks disagree on count or datatype fail on every rank, one saying mismatched",
          "[badinput][mismatch]") {
  struct Variant {
    const char* what;
    MismatchedCall call;
  };
  const std::vector<Variant> variants = {
      {"ring allreduce where rank 2 passes a larger count",
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         return ncclAllReduce(in.data(), out.data(), rank == 2 ? 4000 : 3000, ncclInt32, ncclSum, comm, nullptr);
       }},
      {"reducescatter where rank 1 passes float32 and the others int32",
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         return ncclReduceScatter(in.data(), out.data(), 500, rank == 1 ? ncclFloat32 : ncclInt32, ncclSum, comm,
                                  nullptr);
       }},
      {"allgather where rank 0 passes a smaller count",
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         return ncclAllGather(in.data(), out.data(), rank == 0 ? 100 : 101, ncclUint8, comm, nullptr);
       }},
  };
  for (size_t run = 0; run < 2 * variants.size(); ++run) {
    const Variant& v = variants[run / 2];
    const bool sockets = run % 2 == 1;
    RunResult result = runMismatched(3, "Ring", v.call, sockets);
    INFO(v.what << (sockets ? ", NCCL_SHM_DISABLE=1" : ""));
    INFO(result.describe());
    REQUIRE(result.allOk());
    int saidMismatched = 0;
    for (const RankOutcome& r : result.ranks) {
      INFO("rank " << r.rank << ": result " << record(r, "result") << " after " << record(r, "seconds")
                   << " s: " << record(r, "error"));
      CHECK(record(r, "result") != std::to_string(int(ncclSuccess)));
      CHECK(std::stod(record(r, "seconds")) < kTimeoutSeconds + 6);
      saidMismatched += containsNoCase(record(r, "error"), "mismatched") ? 1 : 0;
    }
    CHECK(saidMismatched >= 1);
  }
}

TEST_CASE("send/recv, broadcast and reduce whose ranks disagree fail quickly with an error naming both ranks",
          "[badinput][mismatch]") {
  // Each variant has one odd rank. Whichever rank receives data across the mismatch
  // detects it (the SlotMeta of the first slot) and names the sender and itself; the
  // others fail from its abort notice or, if they only send and their data fit in the
  // FIFO, may finish. No rank may wait out GYRE_TIMEOUT for the mismatch.
  struct Variant {
    const char* what;
    int nranks;
    int odd;       // the rank whose arguments differ
    bool allFail;  // no rank can finish (a sender blocked on the receiver)
    MismatchedCall call;
  };
  const std::vector<Variant> variants = {
      {"recv of 1200 int32 from rank 0, which sends 1000", 2, 1, false,
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         return rank == 0 ? ncclSend(in.data(), 1000, ncclInt32, 1, comm, nullptr)
                          : ncclRecv(out.data(), 1200, ncclInt32, 0, comm, nullptr);
       }},
      {"recv of 4M+1 int32 from rank 0, which sends 4M (far more than the FIFO and sockets hold)", 2, 1, true,
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         const size_t big = size_t(4) << 20;
         in.resize(4 * big + 4), out.resize(4 * big + 4);
         return rank == 0 ? ncclSend(in.data(), big, ncclInt32, 1, comm, nullptr)
                          : ncclRecv(out.data(), big + 1, ncclInt32, 0, comm, nullptr);
       }},
      {"broadcast from rank 0 where rank 2 passes a larger count", 3, 2, false,
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         return ncclBroadcast(in.data(), out.data(), rank == 2 ? 4000 : 3000, ncclInt32, 0, comm, nullptr);
       }},
      {"reduce to rank 0 where rank 1 passes float64 and the others float32", 3, 1, false,
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         return ncclReduce(in.data(), out.data(), 5000, rank == 1 ? ncclFloat64 : ncclFloat32, ncclSum, 0, comm,
                           nullptr);
       }},
  };
  for (size_t run = 0; run < 2 * variants.size(); ++run) {
    const Variant& v = variants[run / 2];
    const bool sockets = run % 2 == 1;
    RunResult result = runMismatched(v.nranks, nullptr, v.call, sockets);
    INFO(v.what << (sockets ? ", NCCL_SHM_DISABLE=1" : ""));
    INFO(result.describe());
    REQUIRE(result.allOk());
    int saidMismatched = 0;
    for (const RankOutcome& r : result.ranks) {
      const std::string error = record(r, "error");
      INFO("rank " << r.rank << ": result " << record(r, "result") << " after " << record(r, "seconds")
                   << " s: " << error);
      CHECK(std::stod(record(r, "seconds")) < kTimeoutSeconds);
      if (v.allFail) CHECK(record(r, "result") != std::to_string(int(ncclSuccess)));
      if (!containsNoCase(error, "mismatched calls")) continue;  // the detecting rank's report
      ++saidMismatched;
      // Itself by number, a peer, and the odd rank among the two.
      const std::string self = "rank " + std::to_string(r.rank);
      CHECK(containsWord(error, self));
      int peers = 0;
      for (int p = 0; p < v.nranks; ++p) peers += p != r.rank && containsWord(error, "rank " + std::to_string(p));
      CHECK(peers >= 1);
      CHECK((r.rank == v.odd || containsWord(error, "rank " + std::to_string(v.odd))));
    }
    CHECK(saidMismatched >= 1);
  }
}

TEST_CASE("a small send that no receive takes: later pairs keep send order, and destroy warns naming both ranks",
          "[badinput][mismatch]") {
  // Rank 0 sends twice, rank 1 receives once. Both sends fit in the
  // connection's buffer, so both complete (as with NCCL). Messages between a
  // pair are not overtaken (as in MPI): the one receive takes the first send.
  // The second is never received, and rank 1's ncclCommDestroy says so.
  for (bool sockets : {false, true}) {
    RunConfig config;
    config.sockets = sockets;
    const std::string logs = "/tmp/gyre-unreceived-" + std::to_string(getpid()) + (sockets ? "-s" : "-m");
    config.env = {{"NCCL_DEBUG", "WARN"}, {"NCCL_DEBUG_FILE", logs + ".%p"}};
    RunResult result = runRanks(
        2,
        [&](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initHostComm(&comm, rank, n, id) != 0) return 1;
          std::vector<int32_t> first(10, 111), second(10, 222), got(10, 0);
          if (rank == 0) {
            RANK_CHECK(ncclSend(first.data(), 10, ncclInt32, 1, comm, nullptr) == ncclSuccess, "send 1: %s",
                       lastError().c_str());
            RANK_CHECK(ncclSend(second.data(), 10, ncclInt32, 1, comm, nullptr) == ncclSuccess, "send 2: %s",
                       lastError().c_str());
          } else {
            RANK_CHECK(ncclRecv(got.data(), 10, ncclInt32, 0, comm, nullptr) == ncclSuccess, "recv: %s",
                       lastError().c_str());
            RANK_CHECK(got[0] == 111 && got[9] == 111, "the receive took %d, not the first send's 111", got[0]);
          }
          float x = 1;  // both sends are out before rank 1 tears down
          RANK_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "allreduce");
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        [&] {
          RankOptions o;
          o.timeout_s = 40;
          o.env = {{"GYRE_TIMEOUT", "10"}, {"NCCL_SHM_DISABLE", sockets ? std::optional<std::string>("1")
                                                                         : std::nullopt}};
          for (const auto& e : config.env) o.env.push_back(e);
          return o;
        }());
    INFO((sockets ? "sockets: " : "shared memory: ") << result.describe());
    CHECK(result.allOk());
    // The ranks inherit the launcher's log file (named by its pid): read every one.
    std::string text;
    const std::filesystem::path dir = std::filesystem::path(logs).parent_path();
    const std::string stem = std::filesystem::path(logs).filename().string() + ".";
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().filename().string().rfind(stem, 0) != 0) continue;
      std::ifstream log(entry.path());
      text.append(std::istreambuf_iterator<char>(log), std::istreambuf_iterator<char>());
      std::filesystem::remove(entry.path());
    }
    INFO("logs: " << text);
    if (testDeviceComms()) continue;  // staged send/recv over device FIFOs: not readable at teardown
    CHECK(text.find("rank 1's communicator ends with 1 step(s) of data from rank 0 that no ncclRecv took") !=
          std::string::npos);
    CHECK(text.find("rank 0's communicator ends with") == std::string::npos);
  }
}

TEST_CASE("direct broadcast and allgather whose ranks disagree on count fail on every rank, one saying mismatched",
          "[badinput][mismatch][direct]") {
  if (testDeviceComms()) return;  // host communicators only: the device executor has no mesh
  const std::vector<std::pair<const char*, MismatchedCall>> variants = {
      {"broadcast from rank 1 where rank 2 passes a larger count",
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         return ncclBroadcast(in.data(), out.data(), rank == 2 ? 4000 : 3000, ncclInt32, 1, comm, nullptr);
       }},
      {"allgather where rank 0 passes a smaller count",
       [](int rank, ncclComm_t comm, std::vector<char>& in, std::vector<char>& out) {
         return ncclAllGather(in.data(), out.data(), rank == 0 ? 100 : 101, ncclUint8, comm, nullptr);
       }},
  };
  for (size_t run = 0; run < 2 * variants.size(); ++run) {
    const auto& [what, call] = variants[run / 2];
    const bool sockets = run % 2 == 1;
    RunResult result = runMismatched(3, "Direct", call, sockets);
    INFO(what << ", NCCL_ALGO=Direct" << (sockets ? ", NCCL_SHM_DISABLE=1" : ""));
    INFO(result.describe());
    REQUIRE(result.allOk());
    int saidMismatched = 0;
    for (const RankOutcome& r : result.ranks) {
      INFO("rank " << r.rank << ": result " << record(r, "result") << " after " << record(r, "seconds")
                   << " s: " << record(r, "error"));
      CHECK(std::stod(record(r, "seconds")) < kTimeoutSeconds + 6);
      saidMismatched += containsNoCase(record(r, "error"), "mismatched") ? 1 : 0;
    }
    CHECK(saidMismatched >= 1);
  }
}

TEST_CASE("NCCL_ALGO=Direct where no mesh can exist (9 ranks) fails the broadcast naming the variable",
          "[badinput][direct]") {
  if (testDeviceComms()) return;  // a device communicator's error is the same, but 9 fake-GPU ranks are slow
  RunResult result = runFailing(9, "Direct", [](int, int, ncclComm_t comm) {
    std::vector<int> buf(16, 7);
    return timed([&] { return ncclBroadcast(buf.data(), buf.data(), buf.size(), ncclInt32, 0, comm, nullptr); });
  });
  INFO(result.describe());
  REQUIRE(result.allOk());
  for (const RankOutcome& r : result.ranks) {
    INFO("rank " << r.rank << ": " << record(r, "error"));
    CHECK(record(r, "result") == std::to_string(int(ncclInvalidUsage)));
    CHECK(containsNoCase(record(r, "error"), "NCCL_ALGO=Direct"));
    CHECK(containsNoCase(record(r, "error"), "Ring and Tree can run"));
  }
}

TEST_CASE("NCCL_PROTO without Simple on a host communicator fails the call naming the variable and what can run",
          "[badinput][proto]") {
  if (testDeviceComms()) return;  // device kernels run LL
  for (const char* proto : {"LL", "^Simple"}) {
    for (int nranks : {1, 2}) {
      RunResult result = runFailing(
          nranks, nullptr,
          [](int, int, ncclComm_t comm) {
            std::vector<float> buf(5, 1.0f);
            return timed([&] { return ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr); });
          },
          false, nullptr, proto);
      INFO("NCCL_PROTO=" << proto << ", " << nranks << " ranks: " << result.describe());
      REQUIRE(result.allOk());
      for (const RankOutcome& r : result.ranks) {
        INFO("rank " << r.rank << ": " << record(r, "error"));
        CHECK(record(r, "result") == std::to_string(int(ncclInvalidUsage)));
        CHECK(containsNoCase(record(r, "error"), std::string("NCCL_PROTO=") + proto));
        CHECK(containsNoCase(record(r, "error"), "Simple can run here"));
      }
    }
  }
}

TEST_CASE("NCCL_PROTO=Simple on a host communicator runs the call (Simple is what the host executor runs)",
          "[badinput][proto]") {
  if (testDeviceComms()) return;
  RunResult result = runFailing(
      2, nullptr,
      [](int, int nranks, ncclComm_t comm) {
        std::vector<float> buf(7, 1.0f);
        FailOutcome o =
            timed([&] { return ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr); });
        for (float v : buf)
          if (o.result == ncclSuccess && v != float(nranks)) o = {ncclInternalError, "wrong sum", o.seconds};
        return o;
      },
      false, nullptr, "Simple");
  INFO(result.describe());
  REQUIRE(result.allOk());
  for (const RankOutcome& r : result.ranks) {
    INFO("rank " << r.rank << ": " << record(r, "error"));
    CHECK(record(r, "result") == std::to_string(int(ncclSuccess)));
  }
}

// Every rank of a single-copy fault test returned an error, none died of a
// signal, and none waited out more than the timeout.
static void expectEveryRankFailedInTime(const RunResult& result) {
  INFO(result.describe());
  REQUIRE(result.allOk());  // no rank died of a signal
  for (const RankOutcome& r : result.ranks) {
    INFO("rank " << r.rank << ": result " << record(r, "result") << ": " << record(r, "error"));
    CHECK(record(r, "result") != std::to_string(int(ncclSuccess)));
    CHECK(std::stod(record(r, "seconds")) < kTimeoutSeconds + 6);
  }
}

// An in-place 1 MiB Broadcast from rank 0, whose buffer is unmapped before the call.
static FailOutcome broadcastFromUnmappedRoot(int rank, int, ncclComm_t comm) {
  const size_t bytes = 1 << 20;
  void* gone = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  std::vector<char> out(bytes);
  if (rank == 0) munmap(gone, bytes);
  void* buf = rank == 0 ? gone : out.data();
  FailOutcome o = timed([&] { return ncclBroadcast(buf, buf, bytes, ncclUint8, 0, comm, nullptr); });
  if (rank != 0) munmap(gone, bytes);
  return o;
}

TEST_CASE("a single-copy broadcast whose root passes an unmapped buffer fails on every rank naming the root and the read",
          "[badinput][singlecopy]") {
  if (testDeviceComms()) return;  // host communicators only
  RunResult result = runFailing(
      2, nullptr,
      broadcastFromUnmappedRoot,
      false, "always");
  expectEveryRankFailedInTime(result);
  const std::string reader = record(result.ranks[1], "error");
  CHECK(containsNoCase(reader, "single-copy read"));
  CHECK(containsWord(reader, "rank 0"));
  CHECK(containsNoCase(reader, "ncclBroadcast"));
}

// On 2 ranks the root writes the last third of each piece into the reader's
// output (process_vm_writev). With NCCL_BUFFSIZE 64 KiB a piece is 64 KiB,
// so the root writes the last 21845 bytes of the buffer and the reader reads
// everything before them: unmapping the reader's last 16 KiB fails only the
// root's write, which must name the reader; the reader fails from the root's
// abort notice.
TEST_CASE("a single-copy broadcast whose reader's output is partly unmapped fails on every rank naming the write",
          "[badinput][singlecopy]") {
  if (testDeviceComms()) return;  // host communicators only
  RunResult result = runFailing(
      2, nullptr,
      [](int rank, int, ncclComm_t comm) {
        const size_t bytes = 1 << 20, tail = 16 << 10;
        char* buf = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        std::vector<char> in(bytes, 7);
        if (rank == 1) munmap(buf + bytes - tail, tail);  // the part the root writes
        FailOutcome o = timed([&] { return ncclBroadcast(in.data(), buf, bytes, ncclUint8, 0, comm, nullptr); });
        munmap(buf, rank == 1 ? bytes - tail : bytes);
        return o;
      },
      false, "always");
  expectEveryRankFailedInTime(result);
  const std::string root = record(result.ranks[0], "error");
  CHECK(containsNoCase(root, "single-copy write"));
  CHECK(containsWord(root, "rank 1"));
  CHECK(containsNoCase(root, "ncclBroadcast"));
}

// Over sockets a step's payload leaves from the user's buffer (transport.h:
// PayloadPointers), so an in-place Broadcast root's unmapped buffer reaches
// only the kernel, which says EFAULT: the root must name its own buffer (not
// blame its peer for a lost connection), the other rank must fail in time,
// and nobody may die of a signal. (A receiver's unmapped output can still
// crash it: up to 4 KiB of a payload come through the socket's read-ahead
// buffer by memcpy.)
TEST_CASE("a broadcast over sockets whose root's buffer is unmapped fails on every rank, the root naming its send buffer",
          "[badinput][sockets][pointers]") {
  if (testDeviceComms()) return;  // host communicators only
  RunResult result = runFailing(
      2, nullptr,
      broadcastFromUnmappedRoot,
      true);
  expectEveryRankFailedInTime(result);
  const std::string root = record(result.ranks[0], "error");
  CHECK(containsNoCase(root, "send buffer"));
  CHECK(containsNoCase(root, "not readable memory of this process"));
  CHECK(record(result.ranks[0], "result") == std::to_string(int(ncclInvalidArgument)));
}

// The same with two data sockets per connection: the 512 KiB steps of the
// default NCCL_BUFFSIZE go through the helper threads (kSplitBytes), whose
// send() gets the EFAULT; it must read as the root's bad send buffer too,
// not as a connection lost to rank 1.
TEST_CASE("a broadcast over socket helpers whose root's buffer is unmapped fails on every rank, the root naming its "
          "send buffer",
          "[badinput][sockets][pointers]") {
  if (testDeviceComms()) return;  // host communicators only
  RunResult result = runFailing(2, nullptr, broadcastFromUnmappedRoot, true, nullptr, nullptr,
                                {{"NCCL_BUFFSIZE", std::nullopt}, {"NCCL_SOCKET_NTHREADS", "2"}});
  expectEveryRankFailedInTime(result);
  const std::string root = record(result.ranks[0], "error");
  CHECK(containsNoCase(root, "data socket"));
  CHECK(containsNoCase(root, "send buffer"));
  CHECK(containsNoCase(root, "not readable memory of this process"));
  CHECK(record(result.ranks[0], "result") == std::to_string(int(ncclInvalidArgument)));
}
