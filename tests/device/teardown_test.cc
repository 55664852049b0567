// Abort and destroy while the device is busy, on the fake CUDA runtime,
// whose cudaFree and cudaFreeHost wait for the device as the driver's do:
// with one hardware queue (CUDA_DEVICE_MAX_CONNECTIONS=1, as Megatron-LM
// sets), a kernel spinning for a peer or a stream waiting on a peer that was
// killed must not hold ncclCommAbort or ncclCommDestroy past GYRE_TIMEOUT,
// the waits must be released, and once the device moves on nothing the
// communicators held (allocations, IPC mappings, pinned host memory) is left.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "../support/stream_gate.h"
#include "coll_common.h"
#include "held_captured_pair.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

RankOptions oneQueue(const char* timeout) {
  RankOptions o;
  o.timeout_s = 90;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", timeout}, {"GYRE_INIT_TIMEOUT", "10"},
           {"CUDA_DEVICE_MAX_CONNECTIONS", "1"}};
  return o;
}

gyre::DeviceRuntime* rt() { return gyre::deviceRuntime(); }

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

cudaStream_t newStream() {
  cudaStream_t s = nullptr;
  rt()->streamCreate(&s);
  return s;
}

// Whether the work queued on `s` so far completes within `seconds`, polled
// through an event (a synchronize could hang).
bool streamMovesOn(cudaStream_t s, double seconds) {
  gyre::EventHandle e = nullptr;
  if (rt()->eventCreate(&e) != ncclSuccess || rt()->eventRecord(e, s) != ncclSuccess) return false;
  bool done = false;
  const auto start = std::chrono::steady_clock::now();
  while (!done && secondsSince(start) < seconds) {
    if (rt()->eventQuery(e, &done) != ncclSuccess) break;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  rt()->eventDestroy(e);
  return done;
}

std::string describe(const gyre::FakeHoldings& h) {
  return std::to_string(h.deviceAllocations) + " allocations, " + std::to_string(h.ipcMappings) +
         " IPC mappings, " + std::to_string(h.pinnedHost) + " pinned host allocations";
}
bool same(const gyre::FakeHoldings& a, const gyre::FakeHoldings& b) {
  return a.deviceAllocations == b.deviceAllocations && a.ipcMappings == b.ipcMappings && a.pinnedHost == b.pinnedHost;
}

}  // namespace

TEST_CASE("with one hardware queue, ncclCommDestroy and ncclCommAbort return within GYRE_TIMEOUT while a captured "
          "point-to-point kernel spins for a peer whose stream is held, and leave nothing once the device moves on",
          "[device][teardown]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    const size_t count = 1024;
    std::vector<int32_t> send(count, 5), recv(count, -1);
    cudaStream_t streams[2] = {newStream(), newStream()};
    const gyre::FakeHoldings before = gyre::fakeHoldings();
    std::vector<ncclComm_t> comms(2, nullptr);
    int devices[2] = {0, 0};
    RANK_CHECK(ncclCommInitAll(comms.data(), 2, devices) == ncclSuccess, "init: %s", lastError().c_str());
    // Rank 1's stream is held shut before its graph: rank 0's kernel spins
    // for it, and every free on the device waits behind the held stream.
    StreamGate gate;
    if (int failed = launchHeldCapturedPair(comms.data(), streams, send.data(), recv.data(), count, &gate))
      return failed;
    std::atomic<bool> done{false};
    std::thread opener([&] {  // so the process ends even when teardown hangs
      auto since = std::chrono::steady_clock::now();
      while (!done.load() && secondsSince(since) < 25) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      gate.open = true;
    });
    auto start = std::chrono::steady_clock::now();
    const ncclResult_t destroyed = ncclCommDestroy(comms[0]);  // its kernel times out after GYRE_TIMEOUT
    const double destroyTook = secondsSince(start);
    start = std::chrono::steady_clock::now();
    ncclCommAbort(comms[1]);
    const double abortTook = secondsSince(start);
    done = true;
    opener.join();
    RANK_CHECK(destroyed == ncclSuccess, "destroy: %s", lastError().c_str());
    RANK_CHECK(destroyTook < 3 + 4, "ncclCommDestroy took %.1f s with a spinning kernel (GYRE_TIMEOUT 3 s)",
               destroyTook);
    RANK_CHECK(abortTook < 4, "ncclCommAbort took %.1f s with a held stream", abortTook);
    for (cudaStream_t s : streams) RANK_CHECK(streamMovesOn(s, 10), "a stream did not finish once the gate opened");
    RANK_CHECK(gyre::waitForDeferredFrees(10), "the communicators' frees were not made 10 s after the device moved on");
    const gyre::FakeHoldings after = gyre::fakeHoldings();
    RANK_CHECK(same(before, after), "before init: %s; after teardown: %s", describe(before).c_str(),
               describe(after).c_str());
    return 0;
  }, oneQueue("3"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with one hardware queue, a rank whose ncclRecv waits on its stream for a process that is killed aborts "
          "within GYRE_TIMEOUT, its stream moves on, and the communicator leaves nothing behind",
          "[device][teardown][ipc]") {
  RankOptions o = oneQueue("3");
  o.killRank = 1;
  RunResult result = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    cudaStream_t s = newStream();
    void* buffer = nullptr;
    RANK_CHECK(rt()->deviceAlloc(4096, &buffer) == ncclSuccess, "alloc: %s", lastError().c_str());
    const gyre::FakeHoldings before = gyre::fakeHoldings();
    ncclComm_t comm = nullptr;
    RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
    if (rank == 1) {
      // Its send's note is posted, but its stream, held shut, never says
      // the buffer is ready: rank 0's stream waits until rank 1 is killed.
      StreamGate gate;
      rt()->hostFunc(s, &StreamGate::wait, &gate);
      RANK_CHECK(ncclSend(buffer, 1024, ncclFloat32, 0, comm, s) == ncclSuccess, "send: %s", lastError().c_str());
      rankMark();
      for (;;) pause();
    }
    RANK_CHECK(ncclRecv(buffer, 1024, ncclFloat32, 1, comm, s) == ncclSuccess, "recv: %s", lastError().c_str());
    ncclResult_t async = ncclSuccess;
    const auto start = std::chrono::steady_clock::now();
    while (async == ncclSuccess && secondsSince(start) < 15) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ncclCommGetAsyncError(comm, &async);
    }
    RANK_CHECK(async != ncclSuccess, "no failure 15 s after rank 1 was killed");
    const auto abortStart = std::chrono::steady_clock::now();
    ncclCommAbort(comm);
    const double took = secondsSince(abortStart);
    RANK_CHECK(took < 3, "ncclCommAbort took %.1f s (GYRE_TIMEOUT 3 s)", took);
    RANK_CHECK(streamMovesOn(s, 5), "the receive's stream still waits for the killed rank 5 s after the abort");
    RANK_CHECK(gyre::waitForDeferredFrees(10), "the communicator's frees were not made 10 s after the abort");
    const gyre::FakeHoldings after = gyre::fakeHoldings();
    RANK_CHECK(same(before, after), "before init: %s; after abort: %s", describe(before).c_str(),
               describe(after).c_str());
    return 0;
  }, o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with one hardware queue, a process on the direct path whose collective waits on its stream for a process "
          "that is killed aborts within GYRE_TIMEOUT, its stream moves on, and the communicator leaves nothing behind",
          "[device][teardown][direct]") {
  RankOptions o = oneQueue("3");
  o.env.push_back({"GYRE_DEVICE_PATH", "direct"});
  o.killRank = 1;
  RunResult result = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    cudaStream_t s = newStream();
    void* buffer = nullptr;
    RANK_CHECK(rt()->deviceAlloc(4096, &buffer) == ncclSuccess, "alloc: %s", lastError().c_str());
    const gyre::FakeHoldings before = gyre::fakeHoldings();
    ncclComm_t comm = nullptr;
    RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
    if (rank == 1) {
      // Its stream, held shut, never signals that it reached the call.
      StreamGate gate;
      rt()->hostFunc(s, &StreamGate::wait, &gate);
      RANK_CHECK(ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, comm, s) == ncclSuccess, "enqueue: %s",
                 lastError().c_str());
      rankMark();
      for (;;) pause();
    }
    RANK_CHECK(ncclAllReduce(buffer, buffer, 1024, ncclFloat32, ncclSum, comm, s) == ncclSuccess, "enqueue: %s",
               lastError().c_str());
    ncclResult_t async = ncclSuccess;
    const auto start = std::chrono::steady_clock::now();
    while (async == ncclSuccess && secondsSince(start) < 15) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ncclCommGetAsyncError(comm, &async);
    }
    RANK_CHECK(async != ncclSuccess, "no failure 15 s after rank 1 was killed");
    const auto abortStart = std::chrono::steady_clock::now();
    ncclCommAbort(comm);
    const double took = secondsSince(abortStart);
    RANK_CHECK(took < 3, "ncclCommAbort took %.1f s (GYRE_TIMEOUT 3 s)", took);
    RANK_CHECK(streamMovesOn(s, 5), "the collective's stream still waits for the killed rank 5 s after the abort");
    RANK_CHECK(gyre::waitForDeferredFrees(10), "the communicator's frees were not made 10 s after the abort");
    const gyre::FakeHoldings after = gyre::fakeHoldings();
    RANK_CHECK(same(before, after), "before init: %s; after abort: %s", describe(before).c_str(),
               describe(after).c_str());
    return 0;
  }, o);
  INFO(result.describe());
  CHECK(result.allOk());
}
