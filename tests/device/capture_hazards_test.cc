// gyre's device paths under CUDA's stream-capture rules, on the strict fake
// CUDA runtime (tests/support/fake_cuda/capture_rules.h): captures begun
// as applications begin them (Global mode, PyTorch's and nccl-tests'
// default) stay valid while gyre's own threads and other communicators run,
// and what cannot be captured safely is refused with a message naming the
// rank, the call and the rule.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coll_common.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }
ncclResult_t sync(cudaStream_t s) { return gyre::deviceRuntime()->streamSynchronize(s); }
bool says(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

RankOptions captureOptions(const char* devicePath = nullptr) {
  RankOptions o;
  o.timeout_s = 120;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}};
  if (devicePath) o.env.push_back({"GYRE_DEVICE_PATH", devicePath});
  return o;
}

// Device memory of the fake, allocated before any capture.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { gyre::deviceRuntime()->deviceAlloc(bytes ? bytes : 1, &p); }
  ~DeviceBuffer() { gyre::deviceRuntime()->deviceFree(p); }
  int32_t* ints() { return static_cast<int32_t*>(p); }
  void* p = nullptr;
};

int32_t value(int rank, int launch, size_t i) { return int32_t(rank * 100003 + launch * 7919 + int(i) * 13); }

// Captures `count` ints of AllReduce on `comm` into `graph` in Global mode,
// holding the capture open for `openSeconds` while `during` runs.
int captureAllReduce(ncclComm_t comm, DeviceBuffer& in, DeviceBuffer& out, size_t count, cudaStream_t s,
                     gyre::FakeGraph* graph, double openSeconds, const std::function<int()>& during) {
  RANK_CHECK(gyre::fakeBeginCapture(s, graph) == 0, "begin capture");
  RANK_CHECK(ncclAllReduce(in.p, out.p, count, ncclInt32, ncclSum, comm, s) == ncclSuccess, "captured allreduce: %s",
             lastError().c_str());
  int failed = during();
  std::this_thread::sleep_for(std::chrono::duration<double>(openSeconds));
  int ended = gyre::fakeEndCapture(s);
  RANK_CHECK(failed == 0, "the work beside the capture failed");
  RANK_CHECK(ended == 0, "the application's Global capture ended with %s: %s", gyre::fakeCudaErrorName(ended),
             lastError().c_str());
  return 0;
}

// Launches the graph `launches` times with fresh inputs and checks every sum.
int replayAllReduce(ncclComm_t comm, int rank, int n, DeviceBuffer& in, DeviceBuffer& out, size_t count,
                    cudaStream_t s, const gyre::FakeGraph& graph, int launches, int salt) {
  for (int launch = 0; launch < launches; ++launch) {
    for (size_t i = 0; i < count; ++i) in.ints()[i] = value(rank, launch + salt, i);
    RANK_CHECK(gyre::fakeLaunchGraph(graph, s) == 0, "graph launch");
    RANK_CHECK(sync(s) == ncclSuccess, "sync: %s", lastError().c_str());
    for (size_t i = 0; i < count; ++i) {
      int32_t want = 0;
      for (int p = 0; p < n; ++p) want += value(p, launch + salt, i);
      RANK_CHECK(out.ints()[i] == want, "launch %d: rank %d's sum at %zu is %d, not %d", launch, rank, i,
                 out.ints()[i], want);
    }
    // Peers refill their inputs only after every rank checked this launch.
    RANK_CHECK(ncclAllReduce(out.p, out.p, 1, ncclInt32, ncclSum, comm, fakeStream(909)) == ncclSuccess,
               "barrier: %s", lastError().c_str());
    RANK_CHECK(sync(fakeStream(909)) == ncclSuccess, "barrier sync");
  }
  return 0;
}

// PyTorch's pattern: the main thread captures a collective in Global mode
// while gyre's direct-path watchdog queries its events, another thread
// drives a second communicator and a third polls ncclCommGetAsyncError, as
// PyTorch's NCCL watchdog does. Processes sharing a GPU run direct.
int capturedBesideOtherThreads(int rank, int n, const ncclUniqueId& id) {
  const std::vector<ncclUniqueId>& ids = rankIds();
  ncclComm_t captured = nullptr, other = nullptr;
  RANK_CHECK(ncclCommInitRank(&captured, n, ids[0], rank) == ncclSuccess, "init: %s", lastError().c_str());
  RANK_CHECK(ncclCommInitRank(&other, n, ids[1], rank) == ncclSuccess, "init: %s", lastError().c_str());
  (void)id;
  const size_t count = 4099;
  DeviceBuffer in(count * 4), out(count * 4), otherOut(count * 4);
  const cudaStream_t s = fakeStream(900), otherStream = fakeStream(901);
  // The first call of the communicator is the captured one: whatever it
  // sets up (its peers' buffers opened by CUDA IPC) it sets up while the
  // capture runs.
  gyre::FakeGraph first;
  RANK_CHECK(captureAllReduce(captured, in, out, count, s, &first, 0, [] { return 0; }) == 0, "first capture");
  RANK_CHECK(replayAllReduce(captured, rank, n, in, out, count, s, first, 2, 0) == 0, "first graph");
  // Now the watchdog has events to query while the next capture is open.
  const int otherCalls = 5;
  // An input per call: a call may still read its input (on the peer's side
  // too, by IPC) while the driver fills the next one.
  std::vector<std::unique_ptr<DeviceBuffer>> otherIns;
  for (int k = 0; k < otherCalls; ++k) otherIns.push_back(std::make_unique<DeviceBuffer>(count * 4));
  gyre::FakeGraph second;
  std::atomic<bool> capturing{true};
  std::atomic<int> asyncErrors{0};
  std::thread poller;
  std::thread driver;
  int driverFailed = 0;
  int r = captureAllReduce(captured, in, out, count, s, &second, 0.5, [&] {
    poller = std::thread([&] {
      while (capturing.load()) {
        ncclResult_t e = ncclSuccess;
        if (ncclCommGetAsyncError(captured, &e) != ncclSuccess || e != ncclSuccess) asyncErrors.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    driver = std::thread([&] {
      for (int k = 0; k < otherCalls; ++k) {
        DeviceBuffer& otherIn = *otherIns[k];
        for (size_t i = 0; i < count; ++i) otherIn.ints()[i] = value(rank, 50 + k, i);
        if (ncclAllReduce(otherIn.p, otherOut.p, count, ncclInt32, ncclSum, other, otherStream) != ncclSuccess) {
          driverFailed = 1;
          return;
        }
      }
    });
    driver.join();
    return driverFailed;
  });
  capturing.store(false);
  poller.join();
  RANK_CHECK(r == 0, "second capture");
  RANK_CHECK(asyncErrors.load() == 0, "ncclCommGetAsyncError reported %d errors during the capture: %s",
             asyncErrors.load(), lastError().c_str());
  // The other communicator's calls ran (the last one's sums are in its output).
  RANK_CHECK(sync(otherStream) == ncclSuccess, "sync: %s", lastError().c_str());
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (int p = 0; p < n; ++p) want += value(p, 50 + otherCalls - 1, i);
    RANK_CHECK(otherOut.ints()[i] == want, "the second communicator's sum at %zu is %d, not %d", i,
               otherOut.ints()[i], want);
  }
  RANK_CHECK(replayAllReduce(captured, rank, n, in, out, count, s, second, 3, 10) == 0, "second graph");
  ncclResult_t e = ncclSuccess;
  RANK_CHECK(ncclCommGetAsyncError(captured, &e) == ncclSuccess && e == ncclSuccess,
             "the captured communicator failed: %d %s", int(e), lastError().c_str());
  RANK_CHECK(ncclCommDestroy(captured) == ncclSuccess, "destroy: %s", lastError().c_str());
  RANK_CHECK(ncclCommDestroy(other) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

// `n` ranks of this process on fake device 0.
bool ranksOfOneGpu(int n, std::vector<ncclComm_t>* comms) {
  std::vector<int> devs(n, 0);
  comms->assign(n, nullptr);
  return ncclCommInitAll(comms->data(), n, devs.data()) == ncclSuccess;
}

}  // namespace

TEST_CASE("a collective captured in Global mode while gyre's watchdog, a second communicator and an async-error "
          "poller run on other threads replays exactly", "[device][graph][capture]") {
  // Processes sharing a GPU run direct by default; forced, as kernels.
  for (const char* path : {"direct", "kernels"}) {
    INFO("GYRE_DEVICE_PATH=" << path);
    RankOptions o = captureOptions(path);
    o.idCount = 2;
    RunResult result = runRanks(2, capturedBesideOtherThreads, o);
    INFO(result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("two ranks of one process captured on one stream are refused, naming both ranks", "[device][graph]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        DeviceBuffer a(4096), b(4096);
        const cudaStream_t shared = fakeStream(920);
        for (bool collective : {false, true}) {
          std::vector<ncclComm_t> comms;
          RANK_CHECK(ranksOfOneGpu(2, &comms), "init: %s", lastError().c_str());
          gyre::FakeGraph graph;
          RANK_CHECK(gyre::fakeBeginCapture(shared, &graph) == 0, "begin capture");
          RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
          for (int r = 0; r < 2; ++r) {
            if (collective) {
              ncclAllReduce(a.p, b.p, 256, ncclFloat32, ncclSum, comms[r], shared);
            } else {
              ncclSend(a.p, 256, ncclFloat32, 1 - r, comms[r], shared);
              ncclRecv(b.p, 256, ncclFloat32, 1 - r, comms[r], shared);
            }
          }
          ncclResult_t res = ncclGroupEnd();
          std::string text = lastError();
          gyre::fakeEndCapture(shared);
          RANK_CHECK(res == ncclInvalidUsage, "%s: two ranks captured on one stream were accepted",
                     collective ? "AllReduce" : "send/recv");
          RANK_CHECK(says(text, "captured on the stream of rank 0 as well") && says(text, "rank 1"),
                     "unclear error: %s", text.c_str());
          for (ncclComm_t c : comms) ncclCommAbort(c);
        }
        return 0;
      },
      captureOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a call that would stage through host memory is refused under capture, naming why it stages",
          "[device][graph][staged]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        std::vector<ncclComm_t> comms;
        RANK_CHECK(ranksOfOneGpu(2, &comms), "init: %s", lastError().c_str());
        DeviceBuffer a(4096), b(4096);
        std::vector<gyre::FakeGraph> graphs(2);
        for (int r = 0; r < 2; ++r)
          RANK_CHECK(gyre::fakeBeginCapture(fakeStream(930 + r), &graphs[r]) == 0, "begin capture");
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < 2; ++r) ncclAllReduce(a.p, b.p, 256, ncclFloat32, ncclSum, comms[r], fakeStream(930 + r));
        ncclResult_t res = ncclGroupEnd();
        std::string text = lastError();
        for (int r = 0; r < 2; ++r) gyre::fakeEndCapture(fakeStream(930 + r));
        RANK_CHECK(res == ncclInvalidUsage, "a captured staged AllReduce was accepted");
        RANK_CHECK(says(text, "ncclAllReduce") && says(text, "GYRE_DEVICE_PATH=staged") &&
                       says(text, "host functions"), "unclear error: %s", text.c_str());
        for (ncclComm_t c : comms) ncclCommAbort(c);
        return 0;
      },
      captureOptions("staged"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("captured calls on a buffer CUDA IPC cannot share are refused on both sides, naming why they would stage",
          "[device][graph][ipc][staged]") {
  RankOptions o = captureOptions();
  o.idCount = 2;
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId&) {
        // Ordinary memory, not cudaMalloc'd: what PyTorch's expandable
        // segments are to CUDA IPC, a buffer no handle can share.
        std::vector<int32_t> buffer(1024, rank), out(1024, 0);
        const cudaStream_t s = fakeStream(950);
        for (bool collective : {false, true}) {
          ncclComm_t comm = nullptr;
          RANK_CHECK(ncclCommInitRank(&comm, n, rankIds()[collective ? 1 : 0], rank) == ncclSuccess, "init: %s",
                     lastError().c_str());
          gyre::FakeGraph graph;
          RANK_CHECK(gyre::fakeBeginCapture(s, &graph) == 0, "begin capture");
          ncclResult_t res =
              collective ? ncclAllReduce(buffer.data(), out.data(), buffer.size(), ncclInt32, ncclSum, comm, s)
              : rank == 0 ? ncclSend(buffer.data(), buffer.size(), ncclInt32, 1, comm, s)
                          : ncclRecv(buffer.data(), buffer.size(), ncclInt32, 0, comm, s);
          std::string text = lastError();
          gyre::fakeEndCapture(s);
          const char* call = collective ? "ncclAllReduce" : rank == 0 ? "ncclSend" : "ncclRecv";
          RANK_CHECK(res == ncclInvalidUsage, "rank %d: a captured %s that stages was accepted", rank, call);
          RANK_CHECK(says(text, call) && says(text, "staged through host memory") &&
                         says(text, "CUDA IPC cannot share"), "unclear error: %s", text.c_str());
          ncclCommAbort(comm);
        }
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("one-sided puts, signals and waits are refused on a capturing stream, as a replay would repeat stale "
          "counts", "[device][graph][device_api]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        std::vector<ncclComm_t> comms;
        RANK_CHECK(ranksOfOneGpu(2, &comms), "init: %s", lastError().c_str());
        void* bufs[2] = {nullptr, nullptr};
        ncclWindow_t wins[2] = {nullptr, nullptr};
        for (auto& p : bufs) RANK_CHECK(ncclMemAlloc(&p, 4096) == ncclSuccess, "alloc");
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group");
        for (int r = 0; r < 2; ++r) ncclCommWindowRegister(comms[r], bufs[r], 4096, &wins[r], 0);
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "register: %s", lastError().c_str());
        const cudaStream_t s = fakeStream(940);
        gyre::FakeGraph graph;
        RANK_CHECK(gyre::fakeBeginCapture(s, &graph) == 0, "begin capture");
        ncclWaitSignalDesc_t wait{};
        wait.opCnt = 1;
        wait.peer = 1;
        const ncclResult_t results[3] = {
            ncclPutSignal(bufs[0], 16, ncclInt8, 1, wins[0], 0, 0, 0, 0, comms[0], s),
            ncclSignal(1, 0, 0, 0, comms[0], s),
            ncclWaitSignal(1, &wait, comms[0], s)};
        const char* names[3] = {"ncclPutSignal", "ncclSignal", "ncclWaitSignal"};
        std::string text = lastError();
        RANK_CHECK(gyre::fakeEndCapture(s) == 0, "the refusals broke the capture");
        for (int k = 0; k < 3; ++k)
          RANK_CHECK(results[k] == ncclInvalidUsage, "a captured %s was accepted", names[k]);
        RANK_CHECK(says(text, "ncclWaitSignal") && says(text, "rank 0") && says(text, "capturing a CUDA graph"),
                   "unclear error: %s", text.c_str());
        RANK_CHECK(graph.ops.empty(), "the refused calls left %zu operations in the graph", graph.ops.size());
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        for (void* p : bufs) ncclMemFree(p);
        return 0;
      },
      captureOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a staged collective's first call on one thread while another thread holds a Global capture open leaves "
          "that capture valid and sums exactly",
          "[device][graph][staged][capture]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        const int n = 2;
        std::vector<ncclComm_t> comms;
        RANK_CHECK(ranksOfOneGpu(n, &comms), "init: %s", lastError().c_str());
        const size_t count = 1031;
        std::vector<std::unique_ptr<DeviceBuffer>> in, out;
        for (int r = 0; r < n; ++r) {
          in.push_back(std::make_unique<DeviceBuffer>(count * 4));
          out.push_back(std::make_unique<DeviceBuffer>(count * 4));
          for (size_t i = 0; i < count; ++i) in[r]->ints()[i] = value(r, 0, i);
        }
        DeviceBuffer from(4), to(4);
        // The application's capture, open on this thread in Global mode.
        gyre::FakeGraph graph;
        const cudaStream_t captured = fakeStream(960);
        RANK_CHECK(gyre::fakeBeginCapture(captured, &graph) == 0, "begin capture");
        RANK_CHECK(gyre::deviceRuntime()->copyAsync(to.p, from.p, 4, captured) == ncclSuccess, "captured copy");
        // Another thread, in Global mode as threads start, makes the
        // communicators' first staged calls: their host buffers are new.
        ncclResult_t ended = ncclInternalError;
        std::string error;
        std::thread([&] {
          ncclGroupStart();
          for (int r = 0; r < n; ++r)
            ncclAllReduce(in[r]->p, out[r]->p, count, ncclInt32, ncclSum, comms[r], fakeStream(961 + r));
          ended = ncclGroupEnd();
          if (ended != ncclSuccess) error = lastError();
        }).join();
        const int endCapture = gyre::fakeEndCapture(captured);
        RANK_CHECK(ended == ncclSuccess, "the staged calls beside the capture failed: %s", error.c_str());
        RANK_CHECK(endCapture == 0, "the application's Global capture ended with %s: %s",
                   gyre::fakeCudaErrorName(endCapture), lastError().c_str());
        for (int r = 0; r < n; ++r) RANK_CHECK(sync(fakeStream(961 + r)) == ncclSuccess, "sync: %s", lastError().c_str());
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < count; ++i)
            RANK_CHECK(out[r]->ints()[i] == value(0, 0, i) + value(1, 0, i), "rank %d: sum at %zu is %d", r, i,
                       out[r]->ints()[i]);
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      captureOptions("staged"));
  INFO(result.describe());
  CHECK(result.allOk());
}
