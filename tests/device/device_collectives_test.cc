// Over 500 lines on purpose: the cases share the fake-runtime set-up and run
// as one binary per device path (meson runs it once per GYRE_DEVICE_PATH).
// Device communicators on the fake CUDA runtime (GYRE_FAKE_CUDA=1: host
// memory stands in for device memory, each stream is a host thread running
// its work in order, the collective kernel runs as a host thread per lane).
// Run once with GYRE_DEVICE_PATH=kernels (the device executor over p2p
// connections) and once with =staged (copies through host memory and the host
// executor). What is tested is the device path's control flow, which
// is the same on a GPU: ncclCommInitRank on the current device, collectives
// that return before the stream has run them, results in stream order,
// groups spanning streams and communicators (ncclCommInitAll with a repeated
// device), errors surfacing through ncclCommGetAsyncError, and destroy that
// waits for queued work. A GPU is not needed and not used: the CUDA runtime
// adapter (src/device/runtime/cuda_runtime.cc) is verified only on a machine with one.
//
// The binary links gyre's internal static library, so the test can drive the
// fake runtime's streams directly (block one, synchronise one).
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "../support/stream_gate.h"
#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/comm/executor_binding.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "src/device/runtime/runtime.h"
#include "src/plan/planner.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

RankOptions deviceOptions(double timeout = 60) {
  RankOptions o;
  o.timeout_s = timeout;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "5"}, {"GYRE_INIT_TIMEOUT", "10"}};
  return o;
}

// The executor the run asked for (GYRE_DEVICE_PATH) is the one in use.
int checkPath(ncclComm_t comm, int rank) {
  const char* path = getenv("GYRE_DEVICE_PATH");
  bool kernels = !path || strcmp(path, "staged") != 0;
  RANK_CHECK(gyre::runsKernels(comm) == kernels, "rank %d: GYRE_DEVICE_PATH=%s but the communicator runs %s", rank,
             path ? path : "(unset)", gyre::runsKernels(comm) ? "kernels" : "staged");
  return 0;
}

int initDeviceComm(ncclComm_t* comm, int rank, int nranks, const ncclUniqueId& id) {
  ncclResult_t r = ncclCommInitRank(comm, nranks, id, rank);
  RANK_CHECK(r == ncclSuccess, "rank %d: ncclCommInitRank on the fake device returned %d: %s", rank, int(r),
             lastError().c_str());
  int dev = -1;
  RANK_CHECK(ncclCommCuDevice(*comm, &dev) == ncclSuccess && dev == 0, "rank %d: device %d, expected 0", rank, dev);
  return checkPath(*comm, rank);
}

bool checkCase(ncclComm_t comm, int rank, int nranks, ncclDataType_t type, ncclRedOp_t op, size_t count,
               cudaStream_t stream, uint64_t id) {
  gyre::DeviceRuntime* rt = gyre::deviceRuntime();
  const TypeInfo& t = typeInfo(type);
  const size_t bytes = count * t.size;
  std::string what = caseName("device collectives", type, opName(op), count, nranks - 1, false, id);
  Inputs in = makeInputs(t, op, nranks, id, count * nranks);

  std::vector<char> send(in.rank(rank), in.rank(rank) + bytes * nranks);
  std::vector<char> allreduce(bytes + 1, 0x5A), gathered(bytes * nranks + 1), scattered(bytes + 1),
      bcast(bytes + 1), reduced(bytes + 1), recvd(bytes + 1);
  const int root = nranks - 1, next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;

  // Hold the stream shut: every call below must return while nothing has run.
  StreamGate gate;
  rt->hostFunc(stream, &StreamGate::wait, &gate);
  if (!callOk(ncclAllReduce(send.data(), allreduce.data(), count, type, op, comm, stream), rank, what, "ncclAllReduce") ||
      !callOk(ncclAllGather(send.data(), gathered.data(), count, type, comm, stream), rank, what, "ncclAllGather") ||
      !callOk(ncclReduceScatter(send.data(), scattered.data(), count, type, op, comm, stream), rank, what,
              "ncclReduceScatter") ||
      !callOk(ncclBroadcast(send.data(), bcast.data(), count, type, root, comm, stream), rank, what, "ncclBroadcast") ||
      !callOk(ncclReduce(send.data(), reduced.data(), count, type, op, root, comm, stream), rank, what, "ncclReduce"))
    return false;
  ncclGroupStart();
  ncclSend(send.data(), count, type, next, comm, stream);
  ncclRecv(recvd.data(), count, type, prev, comm, stream);
  if (!callOk(ncclGroupEnd(), rank, what, "ncclGroupEnd (send/recv ring)")) return false;
  if (bytes > 0 && static_cast<unsigned char>(allreduce[0]) != 0x5A)
    caseFail("rank %d: %s: the AllReduce output changed before its stream ran", rank, what.c_str());
  gate.open = true;
  rt->streamSynchronize(stream);

  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  if (async != ncclSuccess) {
    caseFail("rank %d: %s: async error %d: %s", rank, what.c_str(), int(async), lastError().c_str());
    return false;
  }
  // AllReduce, Reduce: of every rank's first block; ReduceScatter: of block `rank`.
  std::string wrong = compareToReference(t, op, in.at(0, t.size), allreduce.data(), count);
  if (!wrong.empty()) caseFail("rank %d: %s: allreduce %s", rank, what.c_str(), wrong.c_str());
  if (rank == root) {
    wrong = compareToReference(t, op, in.at(0, t.size), reduced.data(), count);
    if (!wrong.empty()) caseFail("rank %d: %s: reduce %s", rank, what.c_str(), wrong.c_str());
  }
  wrong = compareToReference(t, op, in.at(size_t(rank) * count, t.size), scattered.data(), count);
  if (!wrong.empty()) caseFail("rank %d: %s: reducescatter %s", rank, what.c_str(), wrong.c_str());
  for (int r = 0; r < nranks; ++r) {
    wrong = compareExact(t, gathered.data() + r * bytes, in.rank(r), count);
    if (!wrong.empty()) caseFail("rank %d: %s: allgather block %d %s", rank, what.c_str(), r, wrong.c_str());
  }
  wrong = compareExact(t, bcast.data(), in.rank(root), count);
  if (!wrong.empty()) caseFail("rank %d: %s: broadcast %s", rank, what.c_str(), wrong.c_str());
  wrong = compareExact(t, recvd.data(), in.rank(prev), count);
  if (!wrong.empty()) caseFail("rank %d: %s: recv from %d %s", rank, what.c_str(), prev, wrong.c_str());
  return true;
}

// An AllReduce some peer cannot complete: enqueues it, waits for the
// stream, and reports how long that took and the error the rank then has.
struct FailedCall {
  double waited = 0;
  ncclResult_t async = ncclSuccess;
  std::string text;
};

int awaitFailedAllReduce(ncclComm_t comm, int rank, float* buf, size_t count, cudaStream_t stream, FailedCall* out) {
  double start = monotonicSeconds();
  // A failure this rank already knows of fails the call at enqueue: a peer's
  // notice that arrived with the data of the call before, which completed.
  if (ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, stream) == ncclSuccess)
    gyre::deviceRuntime()->streamSynchronize(stream);
  out->waited = monotonicSeconds() - start;
  ncclCommGetAsyncError(comm, &out->async);
  out->text = ncclGetLastError(comm);
  RANK_CHECK(out->async != ncclSuccess, "rank %d: the failure went unnoticed", rank);
  return 0;
}

}  // namespace

TEST_CASE("device communicators on one fake GPU: every collective returns at once and is right in stream order",
          "[device]") {
  for (int nranks : {1, 2, 3}) {
    INFO(nranks << " ranks sharing fake device 0");
    RunResult result = runRanks(
        nranks,
        [](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
          uint64_t k = 0;
          for (ncclDataType_t type : {ncclFloat32, ncclInt64, ncclBfloat16, ncclUint8})
            for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(65537)}) {
              ncclRedOp_t op = builtinOps()[k % builtinOps().size()];
              if (!checkCase(comm, rank, n, type, op, count, fakeStream(1 + k % 2), caseId(0xDE5, {type, count, k})))
                return 1;
              ++k;
            }
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return rankFailureCount() == 0 ? 0 : 1;
        },
        deviceOptions());
    INFO(result.describe());
    CHECK(result.allOk());
  }
}

// A group of collectives of one type and operator on one stream: on the
// kernel path one launch carries them (the lanes of each channel run in call
// order on one block); a call of another type, or on another stream, starts
// a new launch. Every result is checked, including an in-place AllReduce
// that reads what the previous call of the same launch wrote.
int checkFusedGroup(ncclComm_t comm, int rank, int nranks) {
  const TypeInfo& f = typeInfo(ncclFloat32);
  const TypeInfo& i32 = typeInfo(ncclInt32);
  const size_t big = 65537, mid = 4099, small = 13;
  const int root = nranks - 1;
  Inputs in = makeInputs(f, ncclSum, nranks, 0xF05E, big * nranks);
  Inputs ints = makeInputs(i32, ncclMax, nranks, 0xF05F, small);
  const float* mine = reinterpret_cast<const float*>(in.rank(rank));
  std::vector<float> allreduce(big), twice(small), scattered(mid), gathered(small * nranks), bcast(mid),
      reduced(big), again(mid);
  std::vector<int32_t> maxed(small);
  std::memcpy(twice.data(), mine, small * sizeof(float));
  const int64_t before = gyre::fakeKernelLaunches();
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  ncclAllReduce(mine, allreduce.data(), big, ncclFloat32, ncclSum, comm, fakeStream(1));
  ncclAllReduce(twice.data(), twice.data(), small, ncclFloat32, ncclSum, comm, fakeStream(1));
  ncclAllReduce(mine, allreduce.data(), 0, ncclFloat32, ncclSum, comm, fakeStream(1));  // nothing to run
  ncclReduceScatter(mine, scattered.data(), mid, ncclFloat32, ncclSum, comm, fakeStream(1));
  ncclAllGather(mine, gathered.data(), small, ncclFloat32, comm, fakeStream(1));
  ncclBroadcast(mine, bcast.data(), mid, ncclFloat32, root, comm, fakeStream(1));
  ncclReduce(mine, reduced.data(), big, ncclFloat32, ncclSum, 0, comm, fakeStream(1));
  ncclAllReduce(ints.rank(rank), maxed.data(), small, ncclInt32, ncclMax, comm, fakeStream(1));
  ncclAllReduce(mine, again.data(), mid, ncclFloat32, ncclSum, comm, fakeStream(2));
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  const int64_t launches = gyre::fakeKernelLaunches() - before;
  gyre::deviceRuntime()->streamSynchronize(fakeStream(1));
  gyre::deviceRuntime()->streamSynchronize(fakeStream(2));
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  RANK_CHECK(async == ncclSuccess, "rank %d: async error: %s", rank, lastError().c_str());
  if (gyre::runsKernels(comm))
    RANK_CHECK(launches == 3, "rank %d: the group took %lld kernel launches; expected 3 (6 float sums on stream 1, "
               "the int32 max, the call on stream 2)", rank, static_cast<long long>(launches));

  auto check = [&](const std::string& what, const std::string& wrong) {
    if (!wrong.empty()) caseFail("rank %d: fused group: %s %s", rank, what.c_str(), wrong.c_str());
  };
  check("allreduce", compareToReference(f, ncclSum, in.at(0, f.size), allreduce.data(), big));
  check("reducescatter", compareToReference(f, ncclSum, in.at(size_t(rank) * mid, f.size), scattered.data(), mid));
  for (int r = 0; r < nranks; ++r)
    check("allgather block " + std::to_string(r), compareExact(f, gathered.data() + r * small, in.rank(r), small));
  check("broadcast", compareExact(f, bcast.data(), in.rank(root), mid));
  if (rank == 0) check("reduce", compareToReference(f, ncclSum, in.at(0, f.size), reduced.data(), big));
  check("int32 max", compareToReference(i32, ncclMax, ints.at(0, i32.size), maxed.data(), small));
  check("allreduce on stream 2", compareToReference(f, ncclSum, in.at(0, f.size), again.data(), mid));
  // In place: every rank's first `small` elements, summed.
  for (size_t e = 0; e < small; ++e) {
    double sum = 0;
    for (int r = 0; r < nranks; ++r) sum += reinterpret_cast<const float*>(in.rank(r))[e];
    if (std::abs(twice[e] - sum) > 1e-4 * (1 + std::abs(sum)))
      caseFail("rank %d: fused group: in-place allreduce element %zu is %g, expected %g", rank, e, twice[e], sum);
  }
  return rankFailureCount() == 0 ? 0 : 1;
}

TEST_CASE("a group of collectives of one type and operator on one stream runs as one kernel launch, each call right",
          "[device][group]") {
  for (int nranks : {2, 3}) {
    INFO(nranks << " ranks");
    RunResult result = runRanks(
        nranks,
        [](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
          for (int repeat = 0; repeat < 2; ++repeat)  // the second time from the cached blocks
            if (checkFusedGroup(comm, rank, n) != 0) return 1;
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        deviceOptions());
    INFO(result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("collectives of one communicator issued on two streams without waiting run in call order, each right",
          "[device][streams]") {
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
        // Counts alternate between one piece and several (staged), LL and Simple (kernels).
        const size_t counts[] = {7, 100003, 1, 4099};
        const int calls = 24;
        std::vector<std::vector<float>> bufs(calls);
        for (int i = 0; i < calls; ++i) {
          bufs[i].assign(counts[i % 4], float(rank + 1) * float(i % 5 + 1));
          RANK_CHECK(ncclAllReduce(bufs[i].data(), bufs[i].data(), bufs[i].size(), ncclFloat32, ncclSum, comm,
                                   fakeStream(1 + i % 2)) == ncclSuccess,
                     "rank %d: call %d: %s", rank, i, lastError().c_str());
        }
        gyre::deviceRuntime()->streamSynchronize(fakeStream(1));
        gyre::deviceRuntime()->streamSynchronize(fakeStream(2));
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        RANK_CHECK(async == ncclSuccess, "rank %d: async error: %s", rank, lastError().c_str());
        const float ranksSum = float(n * (n + 1) / 2);
        for (int i = 0; i < calls; ++i)
          for (float v : bufs[i])
            RANK_CHECK(v == ranksSum * float(i % 5 + 1), "rank %d: call %d gave %g, expected %g", rank, i, v,
                       ranksSum * float(i % 5 + 1));
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      deviceOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

// Runs an int32 max AllReduce of `count` elements all equal to `value`, in
// place, and waits for it.
int int32MaxAllReduce(ncclComm_t comm, int rank, size_t count, int32_t value) {
  std::vector<int32_t> data(count, value);
  RANK_CHECK(ncclAllReduce(data.data(), data.data(), count, ncclInt32, ncclMax, comm, fakeStream(1)) == ncclSuccess,
             "rank %d: allreduce: %s", rank, lastError().c_str());
  gyre::deviceRuntime()->streamSynchronize(fakeStream(1));
  RANK_CHECK(data[0] == value && data[count - 1] == value, "rank %d: max of %d is %d", rank, value, data[0]);
  return 0;
}

TEST_CASE("an LL step never takes what an earlier Simple step left in its slot for its own data", "[device][ll]") {
  RankOptions options = deviceOptions();
  options.env.push_back({"NCCL_BUFFSIZE", "65536"});  // 8 KiB steps: a large call fills every slot
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
        const size_t big = 1 << 20, small = 2;
        if (gyre::runsKernels(comm)) {
          gyre::Plan plan;
          gyre::planCollective(gyre::planContextOf(comm), gyre::CollKind::AllReduce, big, 4, &plan);
          RANK_CHECK(plan.protocol == gyre::Protocol::Simple, "rank %d: 4 MiB should run Simple", rank);
          gyre::planCollective(gyre::planContextOf(comm), gyre::CollKind::AllReduce, small, 4, &plan);
          RANK_CHECK(plan.protocol == gyre::Protocol::LL, "rank %d: 8 bytes should run LL", rank);
        }
        // The small call receives its first step on channel 0, at the step
        // counter `head` will have after three large calls. Make the third
        // large call's data that step's LL flag (step + 1) in every word.
        const uint64_t* head = comm->channels[0].recv[0].fifo.head;
        if (int32MaxAllReduce(comm, rank, big, 0) != 0) return 1;
        const uint64_t first = head ? *head : 0;
        if (int32MaxAllReduce(comm, rank, big, 0) != 0) return 1;
        const uint64_t perCall = head ? *head - first : 0;
        const uint64_t llStep = first + 2 * perCall;
        if (int32MaxAllReduce(comm, rank, big, static_cast<int32_t>(llStep + 1)) != 0) return 1;
        if (gyre::runsKernels(comm)) RANK_CHECK(perCall >= 8 && *head == llStep, "rank %d: %llu steps a call", rank,
                                            static_cast<unsigned long long>(perCall));
        // Rank 1 waits for its first LL step while rank 0 holds back.
        if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        std::vector<int32_t> value(small, rank + 1);
        RANK_CHECK(ncclAllReduce(value.data(), value.data(), small, ncclInt32, ncclSum, comm, fakeStream(1)) ==
                       ncclSuccess,
                   "rank %d: small allreduce: %s", rank, lastError().c_str());
        gyre::deviceRuntime()->streamSynchronize(fakeStream(1));
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        RANK_CHECK(async == ncclSuccess, "rank %d: async error: %s", rank, lastError().c_str());
        RANK_CHECK(value[0] == 3 && value[1] == 3, "rank %d: sum is %d %d, expected 3", rank, value[0], value[1]);
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("one process driving two communicators on a repeated fake device: a group spans both and two streams",
          "[device][initall]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[2] = {};
        int devs[2] = {0, 0};
        RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
        const size_t count = 100003;
        std::vector<float> in[2], out[2];
        for (int r = 0; r < 2; ++r) {
          in[r].resize(count);
          out[r].assign(count, -1.f);
          for (size_t i = 0; i < count; ++i) in[r][i] = float(i % 1000) + float(r) * 0.5f;
        }
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < 2; ++r)
          RANK_CHECK(ncclAllReduce(in[r].data(), out[r].data(), count, ncclFloat32, ncclSum, comms[r],
                                   fakeStream(10 + r)) == ncclSuccess,
                     "allreduce %d: %s", r, lastError().c_str());
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        for (int r = 0; r < 2; ++r) gyre::deviceRuntime()->streamSynchronize(fakeStream(10 + r));
        for (int r = 0; r < 2; ++r)
          for (size_t i = 0; i < count; ++i)
            RANK_CHECK(out[r][i] == float(i % 1000) * 2 + 0.5f, "comm %d element %zu: %g", r, i, out[r][i]);
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      deviceOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("CUDA_LAUNCH_BLOCKING=1 with two ranks in one process stages their collectives; forcing kernels fails",
          "[device][initall][settings]") {
  for (const char* path : {"auto", "kernels"}) {
    RankOptions o = deviceOptions();
    o.env.push_back({"CUDA_LAUNCH_BLOCKING", "1"});
    o.env.push_back({"GYRE_DEVICE_PATH", path});
    const bool forced = std::string(path) == "kernels";
    RunResult result = runRanks(
        1,
        [forced](int, int, const ncclUniqueId&) {
          ncclComm_t comms[2] = {};
          int devs[2] = {0, 0};
          ncclResult_t r = ncclCommInitAll(comms, 2, devs);
          if (forced) {
            std::string text = lastError();
            RANK_CHECK(r != ncclSuccess, "kernels were forced under CUDA_LAUNCH_BLOCKING=1 and init succeeded");
            RANK_CHECK(text.find("CUDA_LAUNCH_BLOCKING") != std::string::npos, "unclear error: %s", text.c_str());
            return 0;
          }
          RANK_CHECK(r == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
          std::vector<float> buf[2];
          for (int k = 0; k < 2; ++k) {
            RANK_CHECK(!gyre::runsKernels(comms[k]), "comm %d runs kernels under CUDA_LAUNCH_BLOCKING=1", k);
            buf[k].assign(1000, float(k + 1));
          }
          RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
          for (int k = 0; k < 2; ++k)
            RANK_CHECK(ncclAllReduce(buf[k].data(), buf[k].data(), 1000, ncclFloat32, ncclSum, comms[k],
                                     fakeStream(70 + k)) == ncclSuccess,
                       "allreduce %d: %s", k, lastError().c_str());
          RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
          for (int k = 0; k < 2; ++k) {
            gyre::deviceRuntime()->streamSynchronize(fakeStream(70 + k));
            RANK_CHECK(buf[k][0] == 3.f && buf[k][999] == 3.f, "comm %d: staged result %g", k, buf[k][0]);
          }
          for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        o);
    INFO("GYRE_DEVICE_PATH=" << path << ": " << result.describe());
    CHECK(result.allOk());
  }
}

// CUDA may run every host function of a process on one thread (the fake
// does so too), so staged pieces, which wait for their peers, run on each
// communicator's worker thread and the stream waits for them by a flag
// (src/device/staged/staging_worker.h). Ranks of one process, each driven from its
// own thread without a group, each get a job of their own; both complete.
TEST_CASE("ranks of one process on the staged path, one thread each and no group, both complete",
          "[device][initall]") {
  RankOptions o = deviceOptions();
  o.env.push_back({"NCCL_P2P_DISABLE", "1"});
  o.env.push_back({"GYRE_DEVICE_PATH", "auto"});
  o.env.push_back({"GYRE_TIMEOUT", "3"});
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[2] = {};
        int devs[2] = {0, 0};
        RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
        std::vector<float> buf[2] = {std::vector<float>(1000, 1.f), std::vector<float>(1000, 2.f)};
        ncclResult_t enqueued[2] = {ncclInternalError, ncclInternalError};
        std::thread threads[2];
        for (int k = 0; k < 2; ++k)
          threads[k] = std::thread([&, k] {
            enqueued[k] = ncclAllReduce(buf[k].data(), buf[k].data(), 1000, ncclFloat32, ncclSum, comms[k],
                                        fakeStream(80 + k));
          });
        for (std::thread& t : threads) t.join();
        for (int k = 0; k < 2; ++k) {
          RANK_CHECK(enqueued[k] == ncclSuccess, "allreduce %d: %s", k, lastError().c_str());
          gyre::deviceRuntime()->streamSynchronize(fakeStream(80 + k));
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(comms[k], &async);
          RANK_CHECK(async == ncclSuccess && buf[k][0] == 3.f, "comm %d: %g, %s", k, buf[k][0],
                     async == ncclSuccess ? "no error" : ncclGetLastError(comms[k]));
        }
        for (ncclComm_t c : comms) ncclCommDestroy(c);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a device collective whose peer never comes fails through ncclCommGetAsyncError, and destroy returns",
          "[device][faults]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
        if (rank == 1) {
          // Never joins the collective; waits for rank 0's failure, then leaves.
          std::this_thread::sleep_for(std::chrono::seconds(8));
          ncclCommAbort(comm);
          return 0;
        }
        std::vector<float> buf(1024, 1.f);
        double start = monotonicSeconds();
        RANK_CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, fakeStream(7)) ==
                       ncclSuccess,
                   "enqueue should succeed: %s", lastError().c_str());
        RANK_CHECK(monotonicSeconds() - start < 1.0, "the call waited for the collective");
        gyre::deviceRuntime()->streamSynchronize(fakeStream(7));
        ncclResult_t async = ncclSuccess;
        RANK_CHECK(ncclCommGetAsyncError(comm, &async) == ncclSuccess, "get async error");
        RANK_CHECK(async != ncclSuccess, "the missing peer went unnoticed");
        std::string text = ncclGetLastError(comm);
        RANK_CHECK(text.find("rank 1") != std::string::npos, "error does not name rank 1: %s", text.c_str());
        RANK_CHECK(ncclAllReduce(buf.data(), buf.data(), 1, ncclFloat32, ncclSum, comm, fakeStream(7)) != ncclSuccess,
                   "a failed communicator accepted another call");
        ncclCommAbort(comm);
        return 0;
      },
      deviceOptions(40));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a device collective whose peer is killed fails naming it, long before GYRE_TIMEOUT",
          "[device][faults]") {
  RankOptions o = deviceOptions(60);
  o.env.push_back({"GYRE_TIMEOUT", "60"});  // only the watchdog (or the staged path's sockets) can end it in time
  o.killRank = 2;
  o.killDelay_s = 0.3;
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
        std::vector<float> buf(4096, 1.f);
        cudaStream_t stream = fakeStream(20 + rank);
        if (rank == 2) {
          rankMark();  // the launcher SIGKILLs this rank 0.3 s from now; until then it joins nothing
          std::this_thread::sleep_for(std::chrono::seconds(30));
          return 1;
        }
        FailedCall f;
        if (awaitFailedAllReduce(comm, rank, buf.data(), buf.size(), stream, &f) != 0) return 1;
        RANK_CHECK(f.text.find("rank 2") != std::string::npos, "rank %d: error does not name rank 2: %s", rank,
                   f.text.c_str());
        RANK_CHECK(f.waited < 20, "rank %d: took %.1f s to notice (GYRE_TIMEOUT is 60)", rank, f.waited);
        ncclCommAbort(comm);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a sticky CUDA error fails the communicator with ncclUnhandledCudaError; the peer is told at once",
          "[device][faults]") {
  RankOptions o = deviceOptions(60);
  o.env.push_back({"GYRE_TIMEOUT", "60"});  // only the failing rank's notice can end the peer's wait in time
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
        std::vector<float> buf(4096, 1.f);
        cudaStream_t stream = fakeStream(40 + rank);
        RANK_CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream) ==
                       ncclSuccess, "first allreduce: %s", lastError().c_str());
        gyre::deviceRuntime()->streamSynchronize(stream);
        RANK_CHECK(buf[0] == 2.f, "rank %d: first allreduce gave %g", rank, buf[0]);
        if (rank == 0) {
          // As a kernel's illegal address leaves the context: every later call fails.
          gyre::fakeBreakContext("an illegal memory access was encountered (cudaErrorIllegalAddress)");
          ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, stream);
          std::string text = ncclGetLastError(comm);
          RANK_CHECK(r == ncclUnhandledCudaError, "rank 0: a call on a broken context returned %d (%s)", int(r),
                     text.c_str());
          RANK_CHECK(text.find("illegal memory access") != std::string::npos,
                     "rank 0: the error does not carry CUDA's text: %s", text.c_str());
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(comm, &async);
          RANK_CHECK(async == ncclUnhandledCudaError, "rank 0: ncclCommGetAsyncError says %d", int(async));
          // Stay connected: the peer must learn from the notice, not from a close.
          std::this_thread::sleep_for(std::chrono::seconds(12));
          RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "rank 0: abort on a broken context: %s",
                     lastError().c_str());
          return 0;
        }
        FailedCall f;
        if (awaitFailedAllReduce(comm, rank, buf.data(), buf.size(), stream, &f) != 0) return 1;
        RANK_CHECK(f.text.find("rank 0") != std::string::npos, "rank 1: error does not name rank 0: %s",
                   f.text.c_str());
        RANK_CHECK(f.waited < 10, "rank 1: took %.1f s to learn of the failure (GYRE_TIMEOUT is 60)", f.waited);
        ncclCommAbort(comm);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("device allreduces whose counts differ between ranks fail on both, the peer told at once",
          "[device][faults]") {
  RankOptions o = deviceOptions(60);
  o.env.push_back({"GYRE_TIMEOUT", "60"});  // only the failing rank's notice can end the others' waits in time
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
        std::vector<float> buf(2048, 1.f);
        cudaStream_t stream = fakeStream(30 + rank);
        const size_t count = rank == 1 ? 1024 : 2048;
        FailedCall f;
        if (awaitFailedAllReduce(comm, rank, buf.data(), count, stream, &f) != 0) return 1;
        const std::string& text = f.text;
        const double waited = f.waited;
        // A rank that receives from the odd one out says "mismatched"; the
        // others learn of it from its notice (or see it leave) and name a peer.
        const bool detector = text.find("mismatched") != std::string::npos;
        RANK_CHECK(detector || text.find("rank ") != std::string::npos,
                   "rank %d: error names neither the mismatch nor a peer: %s", rank, text.c_str());
        RANK_CHECK(waited < 10, "rank %d: took %.1f s to learn of the failure (GYRE_TIMEOUT is 60)", rank, waited);
        // The detector stays a while: its peer must not have needed it to leave.
        if (detector) std::this_thread::sleep_for(std::chrono::seconds(12));
        ncclCommAbort(comm);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("NCCL_P2P_DISABLE sends device collectives through host memory; forcing kernels then fails at init",
          "[device][settings]") {
  for (const char* path : {"auto", "kernels"}) {
    RankOptions o = deviceOptions();
    o.env.push_back({"NCCL_P2P_DISABLE", "1"});
    o.env.push_back({"GYRE_DEVICE_PATH", path});
    const bool forced = std::string(path) == "kernels";
    RunResult result = runRanks(
        2,
        [forced](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
          if (forced) {
            std::string text = lastError();
            RANK_CHECK(r != ncclSuccess, "rank %d: kernels were forced without p2p and init succeeded", rank);
            RANK_CHECK(text.find("GYRE_DEVICE_PATH=kernels") != std::string::npos, "rank %d: unclear error: %s",
                       rank, text.c_str());
            return 0;
          }
          RANK_CHECK(r == ncclSuccess, "rank %d: init: %s", rank, lastError().c_str());
          RANK_CHECK(!gyre::runsKernels(comm), "rank %d: kernels run although NCCL_P2P_DISABLE=1", rank);
          std::vector<float> buf(1000, float(rank + 1));
          RANK_CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, fakeStream(60)) ==
                         ncclSuccess,
                     "allreduce: %s", lastError().c_str());
          gyre::deviceRuntime()->streamSynchronize(fakeStream(60));
          RANK_CHECK(buf[0] == 3.f && buf[999] == 3.f, "rank %d: staged result %g", rank, buf[0]);
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        o);
    INFO("GYRE_DEVICE_PATH=" << path << ": " << result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("ncclCommInitRankScalable with two ids and ncclMemAlloc'd buffers on the fake device",
          "[device][abi]") {
  RankOptions o = deviceOptions();
  o.idCount = 2;
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId&) {
        std::vector<ncclUniqueId> ids = rankIds();
        ncclComm_t comm = nullptr;
        RANK_CHECK(ncclCommInitRankScalable(&comm, n, rank, 2, ids.data(), nullptr) == ncclSuccess, "init: %s",
                   lastError().c_str());
        void* buf = nullptr;
        RANK_CHECK(ncclMemAlloc(&buf, 1024 * sizeof(int32_t)) == ncclSuccess && buf, "ncclMemAlloc: %s",
                   lastError().c_str());
        auto* v = static_cast<int32_t*>(buf);  // fake device memory is host memory
        for (int i = 0; i < 1024; ++i) v[i] = rank * 1000 + i;
        RANK_CHECK(ncclAllReduce(buf, buf, 1024, ncclInt32, ncclSum, comm, fakeStream(3)) == ncclSuccess,
                   "allreduce: %s", lastError().c_str());
        gyre::deviceRuntime()->streamSynchronize(fakeStream(3));
        for (int i = 0; i < 1024; ++i)
          RANK_CHECK(v[i] == 3000 + 3 * i, "element %d: %d", i, v[i]);  // ranks 0,1,2: 0+1000+2000 + 3i
        RANK_CHECK(ncclMemFree(buf) == ncclSuccess, "ncclMemFree");
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ncclCommFinalize waits for the collectives queued on a stream, then refuses new ones", "[device][finalize]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initDeviceComm(&comm, rank, n, id) != 0) return 1;
        std::vector<int32_t> buf(4099);
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = rank * 100000 + int32_t(i);
        StreamGate gate;
        gyre::deviceRuntime()->hostFunc(fakeStream(1), &StreamGate::wait, &gate);
        RANK_CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, fakeStream(1)) ==
                       ncclSuccess, "enqueue: %s", lastError().c_str());
        std::thread opener([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          gate.open = true;
        });
        ncclResult_t r = ncclCommFinalize(comm);  // must wait for the gated AllReduce
        opener.join();
        RANK_CHECK(r == ncclSuccess, "finalize: %s", lastError().c_str());
        for (size_t i = 0; i < buf.size(); ++i)
          RANK_CHECK(buf[i] == 100000 + 2 * int32_t(i), "element %zu is %d after finalize", i, buf[i]);
        r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, fakeStream(1));
        RANK_CHECK(r == ncclInvalidUsage && lastError().find("finalized") != std::string::npos,
                   "allreduce after finalize: %d %s", int(r), lastError().c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      deviceOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}
