// Hardware queues shared by streams (CUDA_DEVICE_MAX_CONNECTIONS) on the
// fake CUDA runtime: a wait at a queue's head holds every stream behind it,
// as on a GPU (tests/support/fake_cuda/hardware_queues.h). First the rule on
// the fake itself, then what gyre must still do with one queue per device:
// abort in bounded time while a stream is blocked, and fail after
// GYRE_TIMEOUT instead of hanging.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "../support/stream_gate.h"
#include "coll_common.h"
#include "held_captured_pair.h"
#include "src/comm/comm.h"
#include "src/device/device_comm.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "tests/support/fake_cuda/hardware_queues.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

RankOptions queueOptions(const char* connections, const char* timeout = "60") {
  RankOptions o;
  o.timeout_s = 90;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", timeout}, {"GYRE_INIT_TIMEOUT", "10"},
           {"CUDA_DEVICE_MAX_CONNECTIONS", connections}};
  return o;
}

gyre::DeviceRuntime* rt() { return gyre::deviceRuntime(); }

cudaStream_t newStream() {
  cudaStream_t s = nullptr;
  rt()->streamCreate(&s);
  return s;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Stream A waits for a flag nobody has written; stream B, made next, copies.
// Whether B's copy completes while A waits.
bool copyPassesAWait() {
  auto* flag = static_cast<uint32_t*>(nullptr);
  void* p = nullptr;
  rt()->deviceAlloc(sizeof(uint32_t), &p);
  flag = static_cast<uint32_t*>(p);
  *flag = 0;
  cudaStream_t a = newStream(), b = newStream();
  rt()->streamWaitFlag(a, flag, 1);
  uint32_t from = 7, to = 0;
  rt()->copyAsync(&to, &from, sizeof(from), b);
  auto start = std::chrono::steady_clock::now();
  while (__atomic_load_n(&to, __ATOMIC_ACQUIRE) != 7 && secondsSince(start) < 1)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const bool passed = __atomic_load_n(&to, __ATOMIC_ACQUIRE) == 7;
  __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);  // let A go, and B after it
  rt()->streamSynchronize(a);
  rt()->streamSynchronize(b);
  return passed && to == 7;
}

}  // namespace

TEST_CASE("the fake's streams share CUDA_DEVICE_MAX_CONNECTIONS hardware queues: a wait at the head of the only "
          "queue holds another stream's copy, and with 8 queues it does not",
          "[device][queues]") {
  RunResult one = runRanks(1, [](int, int, const ncclUniqueId&) {
    RANK_CHECK(!copyPassesAWait(), "with one queue, a copy ran past another stream's wait");
    return 0;
  }, queueOptions("1"));
  INFO(one.describe());
  CHECK(one.allOk());
  RunResult eight = runRanks(1, [](int, int, const ncclUniqueId&) {
    RANK_CHECK(copyPassesAWait(), "with 8 queues, a copy on the next stream waited for another stream's wait");
    return 0;
  }, queueOptions("8"));
  INFO(eight.describe());
  CHECK(eight.allOk());
}

TEST_CASE("the fake's kernels start only when their blocks fit the device's resident-block slots",
          "[device][queues]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    gyre::fakeSetResidentBlocks(1);
    uint32_t* words = nullptr;
    void* p = nullptr;
    rt()->deviceAlloc(3 * sizeof(uint32_t), &p);
    words = static_cast<uint32_t*>(p);
    words[0] = words[1] = words[2] = 0;
    cudaStream_t a = newStream(), b = newStream();  // two queues of eight
    gyre::FlagOps wait, write;
    wait.add(&words[2], 1, gyre::FlagOpKind::kWrite);  // it is running
    wait.add(&words[0], 1, gyre::FlagOpKind::kWait);
    write.add(&words[1], 1, gyre::FlagOpKind::kWrite);
    rt()->launchFlagOps(wait, a);  // resident, spinning: the only slot
    auto start = std::chrono::steady_clock::now();
    while (__atomic_load_n(&words[2], __ATOMIC_ACQUIRE) == 0 && secondsSince(start) < 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    RANK_CHECK(words[2] == 1, "the first kernel never started");
    rt()->launchFlagOps(write, b);  // waits for a slot
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const uint32_t early = __atomic_load_n(&words[1], __ATOMIC_ACQUIRE);
    __atomic_store_n(&words[0], 1u, __ATOMIC_RELEASE);
    rt()->streamSynchronize(a);
    rt()->streamSynchronize(b);
    RANK_CHECK(early == 0, "a kernel started while another held the device's only resident slot");
    RANK_CHECK(words[1] == 1, "the second kernel never ran after the slot was freed");
    return 0;
  }, queueOptions("8"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with one hardware queue, ncclCommAbort returns at once while a captured send waits on a peer whose "
          "stream is blocked",
          "[device][queues][abort]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    std::vector<ncclComm_t> comms(2, nullptr);
    int devices[2] = {0, 0};
    RANK_CHECK(ncclCommInitAll(comms.data(), 2, devices) == ncclSuccess, "init: %s", lastError().c_str());
    cudaStream_t streams[2] = {newStream(), newStream()};
    const size_t count = 1024;
    std::vector<int32_t> send(count, 5), recv(count, -1);
    // Rank 1's stream is held shut before its graph: rank 0's kernel spins
    // for it, and with one queue the private stream waits behind both.
    StreamGate gate;
    if (int failed = launchHeldCapturedPair(comms.data(), streams, send.data(), recv.data(), count, &gate))
      return failed;
    std::atomic<bool> aborted{false};
    std::thread opener([&] {  // so the process ends even when abort hangs
      auto since = std::chrono::steady_clock::now();
      while (!aborted.load() && secondsSince(since) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      gate.open = true;
    });
    auto start = std::chrono::steady_clock::now();
    ncclCommAbort(comms[0]);
    ncclCommAbort(comms[1]);
    const double took = secondsSince(start);
    aborted = true;
    opener.join();
    // The gate is open: rank 1's graph still runs (its kernel copies into
    // recv), so the buffers stay until both streams are done.
    for (cudaStream_t s : streams) rt()->streamSynchronize(s);
    RANK_CHECK(took < 5, "ncclCommAbort took %.1f s with a blocked stream", took);
    return 0;
  }, queueOptions("1"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with one hardware queue, ranks of one process whose captured exchange deadlocks behind each other fail "
          "after GYRE_TIMEOUT naming the peer, instead of hanging",
          "[device][queues][timeout]") {
  RankOptions o = queueOptions("1", "2");
  o.timeout_s = 60;
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    const int n = 3;
    const size_t count = 257;
    std::vector<ncclComm_t> comms(n, nullptr);
    std::vector<int> devices(n, 0);
    RANK_CHECK(ncclCommInitAll(comms.data(), n, devices.data()) == ncclSuccess, "init: %s", lastError().c_str());
    std::vector<cudaStream_t> streams(n);
    std::vector<std::vector<int32_t>> send(n, std::vector<int32_t>(count * n, 3)), recv(send);
    std::vector<gyre::FakeGraph> graphs(n);
    for (int r = 0; r < n; ++r) {
      streams[r] = newStream();
      gyre::fakeBeginCapture(streams[r], &graphs[r]);
    }
    // Two exchanges, so each rank's graph holds two kernels: the second
    // waits at the queue's head for the first, which spins for a peer
    // kernel queued behind it.
    for (int round = 0; round < 2; ++round) {
      RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
      for (int r = 0; r < n; ++r)
        for (int p = 0; p < n; ++p)
          RANK_CHECK(ncclSend(send[r].data() + p * count, count, ncclInt32, p, comms[r], streams[r]) ==
                             ncclSuccess &&
                         ncclRecv(recv[r].data() + p * count, count, ncclInt32, p, comms[r], streams[r]) ==
                             ncclSuccess,
                     "captured %d with %d: %s", r, p, lastError().c_str());
      RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
    }
    for (int r = 0; r < n; ++r) gyre::fakeEndCapture(streams[r]);
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < n; ++r) gyre::fakeLaunchGraph(graphs[r], streams[r]);
    for (int r = 0; r < n; ++r) rt()->streamSynchronize(streams[r]);
    const double took = secondsSince(start);
    std::string errors;
    int failed = 0;
    for (int r = 0; r < n; ++r) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comms[r], &async);
      if (async == ncclSuccess) continue;
      ++failed;
      errors += std::string(ncclGetLastError(comms[r])) + "\n";
    }
    RANK_CHECK(failed > 0, "the deadlocked exchange ended after %.1f s with no error", took);
    RANK_CHECK(errors.find("GYRE_TIMEOUT") != std::string::npos && errors.find("for rank ") != std::string::npos,
               "the errors do not name the timeout and the peer: %s", errors.c_str());
    RANK_CHECK(took < 30, "the streams took %.1f s to finish", took);
    for (ncclComm_t c : comms) ncclCommAbort(c);
    return 0;
  }, o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with one hardware queue, processes on the direct path whose stream is held fail after GYRE_TIMEOUT: "
          "their watchdogs read the flags without waiting behind the blocked queue",
          "[device][queues][direct][timeout]") {
  RankOptions o = queueOptions("1", "3");
  o.timeout_s = 60;
  o.env.push_back({"GYRE_DEVICE_PATH", "direct"});
  RunResult result = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
    RANK_CHECK(comm->device->direct != nullptr, "rank %d is not on the direct path", rank);
    void* buf = nullptr;
    RANK_CHECK(ncclMemAlloc(&buf, 4096) == ncclSuccess, "alloc: %s", lastError().c_str());
    cudaStream_t s = newStream();
    // Rank 1's stream is held shut before the call: with one queue, each
    // process's queue then sits behind a wait (rank 0 for rank 1's signal,
    // rank 1 behind its held stream), and so would any copy its watchdog made.
    StreamGate gate;
    if (rank == 1) rt()->hostFunc(s, &StreamGate::wait, &gate);
    auto start = std::chrono::steady_clock::now();
    RANK_CHECK(ncclAllReduce(buf, buf, 1024, ncclFloat32, ncclSum, comm, s) == ncclSuccess, "enqueue: %s",
               lastError().c_str());
    ncclResult_t async = ncclSuccess;
    while (async == ncclSuccess && secondsSince(start) < 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ncclCommGetAsyncError(comm, &async);
    }
    const double failedAfter = secondsSince(start);
    const std::string text = ncclGetLastError(comm);
    gate.open = true;  // the failure released the waits: the streams drain
    rt()->streamSynchronize(s);
    ncclCommAbort(comm);
    ncclMemFree(buf);
    RANK_CHECK(async == ncclRemoteError, "rank %d: no failure %.0f s after the call (GYRE_TIMEOUT 3 s): %d", rank,
               failedAfter, int(async));
    RANK_CHECK(failedAfter > 2 && failedAfter < 15, "rank %d failed after %.1f s (GYRE_TIMEOUT 3 s)", rank,
               failedAfter);
    // A rank may see its peer's process end first (the peer failed on its
    // own timeout a moment earlier, aborted and exited).
    RANK_CHECK(text.find("GYRE_TIMEOUT") != std::string::npos ||
                   (text.find("rank " + std::to_string(1 - rank)) != std::string::npos &&
                    text.find("died") != std::string::npos),
               "rank %d: the error names neither the timeout nor the peer's death: %s", rank, text.c_str());
    return 0;
  }, o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with one hardware queue, a collective of a new shape returns while its stream is held, so a launch "
          "never waits for the device",
          "[device][queues][launch]") {
  RankOptions o = queueOptions("1", "20");
  o.env.push_back({"GYRE_DEVICE_PATH", "kernels"});
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    // Ranks on two devices: each device's only queue carries one rank's work.
    const int n = 2;
    std::vector<ncclComm_t> comms(n, nullptr);
    int devices[n] = {0, 1};
    RANK_CHECK(ncclCommInitAll(comms.data(), n, devices) == ncclSuccess, "init: %s", lastError().c_str());
    const size_t count = 1031;
    std::vector<cudaStream_t> streams(n);
    std::vector<int32_t*> bufs(n);
    uint32_t* gate = nullptr;
    for (int r = 0; r < n; ++r) {
      RANK_CHECK(rt()->setDevice(r) == ncclSuccess, "cudaSetDevice(%d)", r);
      streams[r] = newStream();
      void* p = nullptr;
      RANK_CHECK(rt()->deviceAlloc(count * sizeof(int32_t), &p) == ncclSuccess, "alloc");
      bufs[r] = static_cast<int32_t*>(p);
      for (size_t i = 0; i < count; ++i) bufs[r][i] = int32_t(r * 1000 + int(i));
    }
    void* g = nullptr;
    RANK_CHECK(rt()->setDevice(0) == ncclSuccess && rt()->deviceAlloc(sizeof(uint32_t), &g) == ncclSuccess, "gate");
    gate = static_cast<uint32_t*>(g);
    __atomic_store_n(gate, 0u, __ATOMIC_RELEASE);
    // Rank 0's stream waits at the head of device 0's only queue until the gate opens.
    RANK_CHECK(rt()->streamWaitFlag(streams[0], gate, 1) == ncclSuccess, "wait: %s", lastError().c_str());
    std::atomic<bool> returned{false};
    ncclResult_t ended = ncclInternalError;
    std::string error;
    std::thread caller([&] {
      ncclGroupStart();
      for (int r = 0; r < n; ++r) ncclAllReduce(bufs[r], bufs[r], count, ncclInt32, ncclSum, comms[r], streams[r]);
      ended = ncclGroupEnd();
      if (ended != ncclSuccess) error = lastError();
      returned.store(true);
    });
    const auto start = std::chrono::steady_clock::now();
    while (!returned.load() && secondsSince(start) < 3) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const bool returnedWhileHeld = returned.load();
    __atomic_store_n(gate, 1u, __ATOMIC_RELEASE);
    caller.join();
    RANK_CHECK(returnedWhileHeld, "ncclGroupEnd had not returned 3 s after the calls while rank 0's stream was held: "
               "the launch waited for the device");
    RANK_CHECK(ended == ncclSuccess, "group end: %s", error.c_str());
    for (int r = 0; r < n; ++r)
      RANK_CHECK(rt()->streamSynchronize(streams[r]) == ncclSuccess, "rank %d's stream: %s", r, lastError().c_str());
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        RANK_CHECK(bufs[r][i] == int32_t(1000 + 2 * int(i)), "rank %d: element %zu is %d", r, i, bufs[r][i]);
    for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
    return 0;
  }, o);
  INFO(result.describe());
  CHECK(result.allOk());
}
