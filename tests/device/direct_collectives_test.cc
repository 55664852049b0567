// The direct executor (GYRE_DEVICE_PATH=direct, src/device/direct/direct_calls.h)
// on the fake CUDA runtime: ranks are forked processes on fake device 0,
// buffers come from ncclMemAlloc (memfd "device memory" the peers map by
// fake IPC handles), stream flag waits and writes are stream-thread ops and
// the kernel is its host emulation. What runs here is the executor's
// handshake, share split, buffer mapping, stream ordering and failure
// handling; the CUDA kernel and the driver's stream memory operations are
// verified only on a GPU.
#include <atomic>
#include <cstring>
#include <thread>

#include "../support/shared_flags.h"
#include "../support/stream_gate.h"
#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/config/env.h"
#include "src/device/device_comm.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/runtime/runtime.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

RankOptions directOptions(double timeout = 120) {
  RankOptions o;
  o.timeout_s = timeout;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_DEVICE_PATH", "direct"}, {"GYRE_TIMEOUT", "20"},
           {"GYRE_INIT_TIMEOUT", "10"}};
  return o;
}

int initDirectComm(ncclComm_t* comm, int rank, int nranks, const ncclUniqueId& id) {
  RANK_CHECK(ncclCommInitRank(comm, nranks, id, rank) == ncclSuccess, "rank %d: init: %s", rank,
             lastError().c_str());
  RANK_CHECK((*comm)->device->direct != nullptr, "rank %d: GYRE_DEVICE_PATH=direct but the communicator is not direct",
             rank);
  return 0;
}

// Device buffers for every case: `in` and `out` of up to `bytes`, with the
// data placed at an odd element offset so shares and handles carry offsets.
struct DeviceBuffers {
  char* in = nullptr;
  char* out = nullptr;
  size_t bytes = 0;
};

enum class Coll { AllReduce, Reduce, Broadcast, ReduceScatter, AllGather };
const char* name(Coll c) {
  static const char* names[] = {"allreduce", "reduce", "broadcast", "reducescatter", "allgather"};
  return names[int(c)];
}

// One case: fills this rank's input, runs the collective on the stream,
// waits, and checks the output against the reference (exact for copies).
bool checkDirectCase(ncclComm_t comm, int rank, int nranks, const DeviceBuffers& b, Coll coll, ncclDataType_t type,
                     ncclRedOp_t op, size_t count, bool inPlace, cudaStream_t stream, uint64_t id) {
  const TypeInfo& t = typeInfo(type);
  const size_t bytes = count * t.size;
  const int root = nranks - 1;
  std::string what = caseName(name(coll), type, opName(op), count, root, inPlace, id);
  Inputs in = makeInputs(t, op, nranks, id, count * nranks);
  char* out = b.out + t.size;  // offset: not the allocation's base
  char* send = inPlace ? out : b.in + 3 * t.size;
  size_t sendBytes = bytes, recvBytes = bytes;
  if (coll == Coll::ReduceScatter) sendBytes = bytes * nranks;
  if (coll == Coll::AllGather) recvBytes = bytes * nranks;
  if (inPlace && coll == Coll::ReduceScatter) send = out, out = out + rank * bytes;
  if (inPlace && coll == Coll::AllGather) send = out + rank * bytes;
  memset(b.out, kUnwrittenByte, b.bytes);
  memcpy(send, in.rank(rank), sendBytes);

  ncclResult_t r = ncclSuccess;
  switch (coll) {
    case Coll::AllReduce: r = ncclAllReduce(send, out, count, type, op, comm, stream); break;
    case Coll::Reduce: r = ncclReduce(send, out, count, type, op, root, comm, stream); break;
    case Coll::Broadcast: r = ncclBroadcast(send, out, count, type, root, comm, stream); break;
    case Coll::ReduceScatter: r = ncclReduceScatter(send, out, count, type, op, comm, stream); break;
    case Coll::AllGather: r = ncclAllGather(send, out, count, type, comm, stream); break;
  }
  if (!callOk(r, rank, what, name(coll))) return false;
  gyre::deviceRuntime()->streamSynchronize(stream);
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  if (async != ncclSuccess) {
    caseFail("rank %d: %s: async error %d: %s", rank, what.c_str(), int(async), lastError().c_str());
    return false;
  }
  std::string wrong;
  switch (coll) {
    case Coll::AllReduce: wrong = compareToReference(t, op, in.at(0, t.size), out, count); break;
    case Coll::Reduce:
      if (rank == root) wrong = compareToReference(t, op, in.at(0, t.size), out, count);
      break;
    case Coll::Broadcast: wrong = compareExact(t, out, in.rank(root), count); break;
    case Coll::ReduceScatter:
      wrong = compareToReference(t, op, in.at(size_t(rank) * count, t.size), out, count);
      break;
    case Coll::AllGather:
      for (int p = 0; p < nranks && wrong.empty(); ++p) wrong = compareExact(t, out + p * bytes, in.rank(p), count);
      break;
  }
  (void)recvBytes;
  if (!wrong.empty()) caseFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());
  return true;
}

// Holds the stream until *release turns true: a stream stuck behind other work.
void holdStream(cudaStream_t stream, std::atomic<bool>* release) {
  gyre::deviceRuntime()->hostFunc(
      stream,
      [](void* flag) {
        while (!static_cast<std::atomic<bool>*>(flag)->load())
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      },
      release);
}

// An AllReduce that rank `heldRank` enqueues on a stream held until
// *release: the others pass the exchange and then wait on its signals.
struct HeldCall {
  ncclComm_t comm = nullptr;
  void* buf = nullptr;
  cudaStream_t stream = nullptr;
  double start = 0;
};

int enqueueWithHeldRank(int rank, int nranks, const ncclUniqueId& id, int heldRank, std::atomic<bool>* release,
                        uintptr_t streamBase, HeldCall* out) {
  if (initDirectComm(&out->comm, rank, nranks, id) != 0) return 1;
  RANK_CHECK(ncclMemAlloc(&out->buf, 4096) == ncclSuccess, "ncclMemAlloc: %s", lastError().c_str());
  out->stream = fakeStream(streamBase + rank);
  if (rank == heldRank) holdStream(out->stream, release);
  out->start = monotonicSeconds();
  RANK_CHECK(ncclAllReduce(out->buf, out->buf, 1024, ncclFloat32, ncclSum, out->comm, out->stream) == ncclSuccess,
             "rank %d: enqueue: %s", rank, lastError().c_str());
  return 0;
}

bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }

// Every collective, types, ops, counts, in and out of place, on `nranks`
// processes; `leader`: GYRE_DIRECT_LEADER (rank 0 runs every share).
void checkEveryCollective(int nranks, bool leader) {
  const std::vector<ncclDataType_t> types = {ncclInt8, ncclUint32, ncclInt64, ncclFloat16, ncclBfloat16,
                                             ncclFloat32, ncclFloat64, ncclFloat8e5m2};
  const std::vector<size_t> counts = {1, 2, 13, 1021, 20011};
  RankOptions options = directOptions(300);
  options.env.push_back({"GYRE_DIRECT_LEADER", leader ? "1" : "0"});
  {
    RunResult result = runRanks(
        nranks,
        [&](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initDirectComm(&comm, rank, n, id) != 0) return 1;
          DeviceBuffers b;
          b.bytes = 20011 * 8 * size_t(n) + 64;
          RANK_CHECK(ncclMemAlloc(reinterpret_cast<void**>(&b.in), b.bytes) == ncclSuccess &&
                         ncclMemAlloc(reinterpret_cast<void**>(&b.out), b.bytes) == ncclSuccess,
                     "ncclMemAlloc: %s", lastError().c_str());
          cudaStream_t stream = fakeStream(70 + rank);
          size_t cases = 0;
          for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::Broadcast, Coll::ReduceScatter, Coll::AllGather})
            for (ncclDataType_t type : types)
              for (ncclRedOp_t op : builtinOps()) {
                if (!reduces(coll) && op != ncclSum) continue;
                for (size_t count : counts) {
                  // Prod inputs are costly to make; the small counts cover it.
                  if (op == ncclProd && count > 1021) continue;
                  for (bool inPlace : {false, true}) {
                    uint64_t id = caseId(0xd1ec7, {uint64_t(coll), uint64_t(type), uint64_t(op), count,
                                                   uint64_t(inPlace), uint64_t(n)});
                    if (!checkDirectCase(comm, rank, n, b, coll, type, op, count, inPlace, stream, id)) return 1;
                    ++cases;
                  }
                }
              }
          RANK_CHECK(comm->device->direct->callsRun.load() == cases, "rank %d: %llu of %zu calls ran direct", rank,
                     (unsigned long long)comm->device->direct->callsRun.load(), cases);
          RANK_CHECK(comm->device->direct->leaderRunsAll == leader, "rank %d: GYRE_DIRECT_LEADER=%d not in effect",
                     rank, int(leader));
          ncclMemFree(b.in);
          ncclMemFree(b.out);
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        options);
    INFO(nranks << " ranks, GYRE_DIRECT_LEADER=" << leader << ": " << result.describe());
    CHECK(result.allOk());
  }
}

}  // namespace

TEST_CASE("direct collectives between processes sharing a fake GPU: every collective, types, ops, counts, "
          "in and out of place", "[direct]") {
  checkEveryCollective(2, false);
  checkEveryCollective(3, false);
}

TEST_CASE("direct with GYRE_DIRECT_LEADER=1: rank 0 runs every rank's share, the others only signal",
          "[direct][leader]") {
  checkEveryCollective(3, true);
}

TEST_CASE("direct: GYRE_DIRECT_LEADER set differently on the ranks fails init on every rank, naming it",
          "[direct][leader]") {
  RankOptions options = directOptions(60);
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        setenv("GYRE_DIRECT_LEADER", rank == 0 ? "1" : "0", 1);
        gyre::env::reloadForTesting("/etc/nccl.conf");  // the launcher read the environment before the fork
        ncclComm_t comm = nullptr;
        ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
        RANK_CHECK(r == ncclInvalidUsage, "rank %d: init returned %d, not ncclInvalidUsage", rank, int(r));
        std::string text = lastError();
        RANK_CHECK(text.find("GYRE_DIRECT_LEADER differs") != std::string::npos, "rank %d: unclear error: %s",
                   rank, text.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

namespace {

// Rank r's PreMulSum scalar: a different one on every rank, exact in every
// format (floats) or using several bits (integers).
void rankScalar(const TypeInfo& t, int rank, void* out) {
  static const long double kFloatScalars[] = {0.5L, 1.5L, -2, 3};
  memset(out, 0, 8);
  if (t.kind == Kind::kFloat) t.store(kFloatScalars[rank % 4], out);
  else storeBits(t, uint64_t(rank) * 0x9d + 3, out);
}

// One PreMulSum case: each rank's own scalar (by value, or in device memory
// for ncclScalarDevice), checked against sum over r of scalar_r * input_r.
bool checkPreMulSumCase(ncclComm_t comm, int rank, int nranks, const DeviceBuffers& b, Coll coll,
                        ncclDataType_t type, size_t count, ncclScalarResidence_t residence, cudaStream_t stream,
                        uint64_t id) {
  const TypeInfo& t = typeInfo(type);
  const size_t bytes = count * t.size;
  const int root = 1;
  std::string what = caseName(name(coll), type, residence == ncclScalarDevice ? "premulsum(device)" : "premulsum",
                              count, root, false, id);
  Inputs in = makeInputs(t, ncclSum, nranks, id, count * nranks);
  std::vector<std::vector<unsigned char>> scalars(size_t(nranks), std::vector<unsigned char>(8));
  std::vector<const void*> scalarPtrs;
  for (int r = 0; r < nranks; ++r) {
    rankScalar(t, r, scalars[size_t(r)].data());
    scalarPtrs.push_back(scalars[size_t(r)].data());
  }
  // The device scalar sits past the buffers' data (the fake's device memory).
  void* scalarHome = b.in + b.bytes - 8;
  memcpy(scalarHome, scalars[size_t(rank)].data(), 8);
  ncclRedOp_t op;
  if (!callOk(ncclRedOpCreatePreMulSum(&op, residence == ncclScalarDevice ? scalarHome : scalars[size_t(rank)].data(),
                                       type, residence, comm),
              rank, what, "ncclRedOpCreatePreMulSum"))
    return false;
  char* out = b.out + t.size;
  char* send = b.in + 3 * t.size;
  memset(b.out, kUnwrittenByte, b.bytes - 8);
  memcpy(send, in.rank(rank), coll == Coll::ReduceScatter ? bytes * nranks : bytes);
  ncclResult_t r = ncclSuccess;
  const uint64_t directBefore = comm->device->direct->callsRun.load();
  switch (coll) {
    case Coll::AllReduce: r = ncclAllReduce(send, out, count, type, op, comm, stream); break;
    case Coll::Reduce: r = ncclReduce(send, out, count, type, op, root, comm, stream); break;
    default: r = ncclReduceScatter(send, out, count, type, op, comm, stream); break;
  }
  if (!callOk(r, rank, what, name(coll))) return false;
  // Scalars by value run direct; one in a process's device memory, which
  // its peers cannot read, is staged by every rank.
  const bool ranDirect = comm->device->direct->callsRun.load() > directBefore;
  if (ranDirect != (residence == ncclScalarHostImmediate))
    caseFail("rank %d: %s: %s", rank, what.c_str(), ranDirect ? "ran direct" : "did not run direct");
  gyre::deviceRuntime()->streamSynchronize(stream);
  if (!callOk(ncclRedOpDestroy(op, comm), rank, what, "ncclRedOpDestroy")) return false;
  if (coll != Coll::Reduce || rank == root) {
    const size_t offset = coll == Coll::ReduceScatter ? size_t(rank) * count : 0;
    std::string wrong = compareToPreMulSumReference(t, scalarPtrs, in.at(offset, t.size), out, count);
    if (!wrong.empty()) caseFail("rank %d: %s: %s", rank, what.c_str(), wrong.c_str());
  }
  return true;
}

}  // namespace

TEST_CASE("direct: PreMulSum multiplies each rank's input by that rank's own scalar, by value or in device memory",
          "[direct][premulsum]") {
  for (const char* leader : {"1", "0"}) {
    RankOptions options = directOptions(120);
    options.env.push_back({"GYRE_DIRECT_LEADER", leader});
    RunResult result = runRanks(
        3,
        [](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initDirectComm(&comm, rank, n, id) != 0) return 1;
          DeviceBuffers b;
          b.bytes = 1021 * 8 * size_t(n) + 128;
          RANK_CHECK(ncclMemAlloc(reinterpret_cast<void**>(&b.in), b.bytes) == ncclSuccess &&
                         ncclMemAlloc(reinterpret_cast<void**>(&b.out), b.bytes) == ncclSuccess,
                     "ncclMemAlloc: %s", lastError().c_str());
          cudaStream_t stream = fakeStream(90 + rank);
          for (Coll coll : {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter})
            for (ncclDataType_t type : {ncclFloat32, ncclFloat64, ncclBfloat16, ncclInt32, ncclUint64})
              for (size_t count : {size_t(1), size_t(13), size_t(1021)})
                for (ncclScalarResidence_t residence : {ncclScalarHostImmediate, ncclScalarDevice}) {
                  uint64_t id = caseId(0x9e1d, {uint64_t(coll), uint64_t(type), count, uint64_t(residence)});
                  if (!checkPreMulSumCase(comm, rank, n, b, coll, type, count, residence, stream, id)) return 1;
                }
          ncclMemFree(b.in);
          ncclMemFree(b.out);
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        options);
    INFO("GYRE_DIRECT_LEADER=" << leader << ": " << result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("direct: a call on another stream waits for the previous call, whose input a held stream still writes",
          "[direct][streams]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDirectComm(&comm, rank, n, id) != 0) return 1;
        gyre::DeviceRuntime* rt = gyre::deviceRuntime();
        const size_t count = 4096, bytes = count * sizeof(float);
        void* first = nullptr;
        void* second = nullptr;
        RANK_CHECK(ncclMemAlloc(&first, bytes) == ncclSuccess && ncclMemAlloc(&second, bytes) == ncclSuccess,
                   "ncclMemAlloc: %s", lastError().c_str());
        std::vector<float> value(count, float(rank + 1));
        std::memset(first, 0, bytes);
        std::memcpy(second, value.data(), bytes);
        // Stream 1: held, then the copy that fills the first call's input.
        StreamGate gate;
        rt->hostFunc(fakeStream(1), &StreamGate::wait, &gate);
        rt->copyAsync(first, value.data(), bytes, fakeStream(1));
        RANK_CHECK(ncclAllReduce(first, first, count, ncclFloat32, ncclSum, comm, fakeStream(1)) == ncclSuccess,
                   "allreduce 1: %s", lastError().c_str());
        RANK_CHECK(ncclAllReduce(second, second, count, ncclFloat32, ncclSum, comm, fakeStream(2)) == ncclSuccess,
                   "allreduce 2: %s", lastError().c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(200));  // room for stream 2 to run ahead
        gate.open = true;
        rt->streamSynchronize(fakeStream(1));
        rt->streamSynchronize(fakeStream(2));
        const float* a = static_cast<const float*>(first);
        const float* b = static_cast<const float*>(second);
        RANK_CHECK(a[0] == 3.f && a[count - 1] == 3.f, "rank %d: the held call gave %g, expected 3", rank, a[0]);
        RANK_CHECK(b[0] == 3.f && b[count - 1] == 3.f, "rank %d: the second call gave %g, expected 3", rank, b[0]);
        RANK_CHECK(comm->device->direct->callsRun.load() == 2, "rank %d: %d calls ran direct, expected 2", rank,
                   int(comm->device->direct->callsRun.load()));
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        ncclMemFree(first);
        ncclMemFree(second);
        return 0;
      },
      directOptions(60));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("direct: a call on memory that is not cudaMalloc'd is staged by every rank; a mismatch fails all",
          "[direct]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDirectComm(&comm, rank, n, id) != 0) return 1;
        cudaStream_t stream = fakeStream(80 + rank);
        // Rank 1's buffer is ordinary memory (the fake takes it as device
        // memory, but it has no IPC handle): both ranks stage the call.
        void* dev = nullptr;
        RANK_CHECK(ncclMemAlloc(&dev, 4096) == ncclSuccess, "ncclMemAlloc: %s", lastError().c_str());
        std::vector<float> heap(1024);
        float* buf = rank == 0 ? static_cast<float*>(dev) : heap.data();
        for (int i = 0; i < 1024; ++i) buf[i] = float(rank + 1);
        RANK_CHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, stream) == ncclSuccess, "allreduce: %s",
                   lastError().c_str());
        gyre::deviceRuntime()->streamSynchronize(stream);
        RANK_CHECK(buf[0] == 3.f && buf[1023] == 3.f, "rank %d: staged result %g", rank, buf[0]);
        RANK_CHECK(comm->device->direct->callsRun.load() == 0, "rank %d: a call ran direct on unmappable memory", rank);
        // Counts that differ: every rank sees both in the exchange and fails now.
        float* d = static_cast<float*>(dev);
        ncclResult_t r = ncclAllReduce(d, d, rank == 0 ? 1024 : 512, ncclFloat32, ncclSum, comm, stream);
        std::string text = lastError();
        RANK_CHECK(r == ncclInvalidUsage && text.find("mismatched") != std::string::npos,
                   "rank %d: a mismatched call returned %d: %s", rank, int(r), text.c_str());
        ncclMemFree(dev);
        ncclCommAbort(comm);
        return 0;
      },
      directOptions(60));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("direct: a peer killed while the others' streams wait on it fails them naming it, long before "
          "GYRE_TIMEOUT", "[direct][faults]") {
  RankOptions o = directOptions(60);
  o.env.push_back({"GYRE_TIMEOUT", "60"});
  o.killRank = 2;
  o.killDelay_s = 0.5;
  // A survivor that exits first would be a second dead peer, which the other
  // survivor might name instead: each leaves once both have their error.
  SharedFlags flags;
  REQUIRE(flags.ok());
  RunResult result = runRanks(
      3,
      [&flags](int rank, int n, const ncclUniqueId& id) {
        static std::atomic<bool> never{false};
        HeldCall h;
        if (enqueueWithHeldRank(rank, n, id, 2, &never, 90, &h) != 0) return 1;
        if (rank == 2) {
          rankMark();  // SIGKILLed 0.5 s from now
          std::this_thread::sleep_for(std::chrono::seconds(30));
          return 1;
        }
        gyre::deviceRuntime()->streamSynchronize(h.stream);
        double waited = monotonicSeconds() - h.start;
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(h.comm, &async);
        std::string text = ncclGetLastError(h.comm);
        RANK_CHECK(async == ncclRemoteError, "rank %d: async error %d after the peer died: %s", rank, int(async),
                   text.c_str());
        RANK_CHECK(text.find("rank 2") != std::string::npos, "rank %d: error does not name rank 2: %s", rank,
                   text.c_str());
        RANK_CHECK(waited < 20, "rank %d: took %.1f s (GYRE_TIMEOUT is 60)", rank, waited);
        flags.markDone(rank);
        RANK_CHECK(flags.waitDone(1 - rank, 20), "rank %d: survivor %d never got its error", rank, 1 - rank);
        RANK_CHECK(ncclCommAbort(h.comm) == ncclSuccess, "abort: %s", lastError().c_str());
        ncclMemFree(h.buf);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("direct: a peer whose stream never reaches the call fails both ranks after GYRE_TIMEOUT, naming it",
          "[direct][faults]") {
  RankOptions o = directOptions(60);
  o.env.push_back({"GYRE_TIMEOUT", "3"});
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        static std::atomic<bool> open{false};
        HeldCall h;
        if (enqueueWithHeldRank(rank, n, id, 1, &open, 100, &h) != 0) return 1;
        ncclResult_t async = ncclSuccess;
        while (async == ncclSuccess && monotonicSeconds() - h.start < 20) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          ncclCommGetAsyncError(h.comm, &async);
        }
        double waited = monotonicSeconds() - h.start;
        std::string text = ncclGetLastError(h.comm);
        open = true;
        gyre::deviceRuntime()->streamSynchronize(h.stream);  // released: returns
        RANK_CHECK(async == ncclRemoteError, "rank %d: async error %d: %s", rank, int(async), text.c_str());
        RANK_CHECK(text.find("rank 1") != std::string::npos, "rank %d: error does not name rank 1: %s", rank,
                   text.c_str());
        RANK_CHECK(waited > 2 && waited < 15, "rank %d: failed after %.1f s (GYRE_TIMEOUT is 3)", rank, waited);
        RANK_CHECK(ncclCommAbort(h.comm) == ncclSuccess, "abort: %s", lastError().c_str());
        ncclMemFree(h.buf);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

// On an H100 a rank killed between calls left its peer with "did not all
// reach this call within GYRE_TIMEOUT" at once, long before the timeout:
// the meeting broke, and the error now says so (or, when the watchdog saw
// the process gone first, that it died).
TEST_CASE("direct: a peer killed between calls fails the next call at once, naming it and what happened",
          "[direct][faults]") {
  RankOptions o = directOptions(60);
  o.env.push_back({"GYRE_TIMEOUT", "30"});
  o.killRank = 1;
  o.killDelay_s = 0.2;
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDirectComm(&comm, rank, n, id) != 0) return 1;
        void* buf = nullptr;
        RANK_CHECK(ncclMemAlloc(&buf, 4096) == ncclSuccess, "rank %d: ncclMemAlloc: %s", rank, lastError().c_str());
        cudaStream_t stream = fakeStream(60 + rank);
        RANK_CHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, stream) == ncclSuccess,
                   "rank %d: first call: %s", rank, lastError().c_str());
        gyre::deviceRuntime()->streamSynchronize(stream);
        if (rank == 1) {
          rankMark();  // SIGKILLed 0.2 s from now
          std::this_thread::sleep_for(std::chrono::seconds(30));
          return 1;
        }
        double start = monotonicSeconds();
        ncclResult_t r = ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, stream);
        double waited = monotonicSeconds() - start;
        std::string text = ncclGetLastError(comm);
        RANK_CHECK(r != ncclSuccess, "rank 0: the call after the peer died succeeded");
        const bool says = text.find("meeting before this call broke") != std::string::npos ||
                          text.find("died") != std::string::npos;
        RANK_CHECK(says && text.find("rank 1") != std::string::npos && text.find("GYRE_TIMEOUT") == std::string::npos,
                   "rank 0: the error says neither what happened nor which rank: %s", text.c_str());
        RANK_CHECK(waited < 10, "rank 0: took %.1f s (GYRE_TIMEOUT is 30)", waited);
        ncclCommAbort(comm);
        ncclMemFree(buf);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}
