// Waits between ranks of one process that spin in a kernel (the flag
// kernel: captured direct collectives, ncclWaitSignal), on the fake CUDA
// runtime: a peer that never arrives fails the waiting rank after
// GYRE_TIMEOUT naming that peer, and a wait does not hold a hardware queue
// that the peer's stream shares (CUDA_DEVICE_MAX_CONNECTIONS=1).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/comm/window.h"
#include "src/device/device_comm.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

gyre::DeviceRuntime* rt() { return gyre::deviceRuntime(); }

RankOptions waitOptions(const char* connections, const char* timeout) {
  RankOptions o;
  o.timeout_s = 60;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", timeout}, {"GYRE_INIT_TIMEOUT", "10"},
           {"CUDA_DEVICE_MAX_CONNECTIONS", connections}};
  return o;
}

cudaStream_t newStream() {
  cudaStream_t s = nullptr;
  rt()->streamCreate(&s);
  return s;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Whether the work queued on `s` so far finishes within `seconds`.
bool finishesWithin(cudaStream_t s, double seconds) {
  gyre::EventHandle e = nullptr;
  if (rt()->eventCreate(&e) != ncclSuccess || rt()->eventRecord(e, s) != ncclSuccess) return false;
  auto start = std::chrono::steady_clock::now();
  bool done = false;
  while (rt()->eventQuery(e, &done) == ncclSuccess && !done && secondsSince(start) < seconds)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  rt()->eventDestroy(e);
  return done;
}

std::string asyncErrorOf(ncclComm_t comm) {
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm, &async);
  return async == ncclSuccess ? std::string() : std::string(ncclGetLastError(comm));
}

bool says(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

// Two ranks of this process on fake device 0, each with an AllReduce
// captured into its own graph on its own stream (the direct path's flag
// kernel around the share).
struct CapturedPair {
  static constexpr int n = 2;
  static constexpr size_t count = 1000;
  std::vector<ncclComm_t> comms = std::vector<ncclComm_t>(n, nullptr);
  std::vector<cudaStream_t> streams = std::vector<cudaStream_t>(n, nullptr);
  std::vector<std::vector<float>> in = std::vector<std::vector<float>>(n, std::vector<float>(count, 1)), out = in;
  std::vector<gyre::FakeGraph> graphs = std::vector<gyre::FakeGraph>(n);
};

int captureAllReduces(CapturedPair* p) {
  std::vector<int> devices(p->n, 0);
  RANK_CHECK(ncclCommInitAll(p->comms.data(), p->n, devices.data()) == ncclSuccess, "init: %s", lastError().c_str());
  RANK_CHECK(p->comms[0]->device->direct && p->comms[0]->device->direct->clique,
             "ranks of one process do not run direct");
  for (int r = 0; r < p->n; ++r) {
    p->streams[r] = newStream();
    RANK_CHECK(gyre::fakeBeginCapture(p->streams[r], &p->graphs[r]) == 0, "begin capture");
  }
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < p->n; ++r)
    RANK_CHECK(ncclAllReduce(p->in[r].data(), p->out[r].data(), p->count, ncclFloat32, ncclSum, p->comms[r],
                             p->streams[r]) == ncclSuccess, "captured allreduce: %s", lastError().c_str());
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  for (int r = 0; r < p->n; ++r) RANK_CHECK(gyre::fakeEndCapture(p->streams[r]) == 0, "end capture");
  return 0;
}

}  // namespace

TEST_CASE("a captured direct collective whose peer's graph is never launched fails after GYRE_TIMEOUT naming "
          "that peer, instead of spinning forever",
          "[device][graph][direct][timeout]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    CapturedPair p;
    if (captureAllReduces(&p) != 0) return 1;
    std::vector<ncclComm_t>& comms = p.comms;
    std::vector<cudaStream_t>& streams = p.streams;
    std::vector<gyre::FakeGraph>& graphs = p.graphs;
    // Only rank 0's graph runs: its flag kernel waits for rank 1's "ready".
    auto start = std::chrono::steady_clock::now();
    RANK_CHECK(gyre::fakeLaunchGraph(graphs[0], streams[0]) == 0, "launch");
    const bool finished = finishesWithin(streams[0], 20);
    const double took = secondsSince(start);
    const std::string error = asyncErrorOf(comms[0]);
    for (ncclComm_t c : comms) ncclCommAbort(c);
    RANK_CHECK(finished, "rank 0's graph still spins %.0f s after a 2 s GYRE_TIMEOUT", took);
    RANK_CHECK(took >= 1.5, "rank 0's graph ended after %.1f s, before GYRE_TIMEOUT", took);
    RANK_CHECK(says(error, "GYRE_TIMEOUT") && says(error, "rank 1's \"ready\" signal") && says(error, "rank 0"),
               "rank 0's error does not name the timeout and the peer: '%s'", error.c_str());
    // Rank 0 runs every share by default: after the wait gave up it must
    // not, as rank 1's buffers were never ready (the sum would be 2).
    for (int r = 0; r < p.n; ++r)
      for (size_t i = 0; i < p.count; ++i)
        RANK_CHECK(p.out[r][i] == 1, "rank %d's output at %zu was written (%g) after the wait timed out", r, i,
                   p.out[r][i]);
    return 0;
  }, waitOptions("8", "2"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ncclCommAbort stops a captured direct collective's flag kernel at once, through its abort word in "
          "mapped host memory",
          "[device][graph][direct][abort]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    CapturedPair p;  // rank 0's flag kernel spins for rank 1's graph, which never runs
    if (captureAllReduces(&p) != 0) return 1;
    std::vector<ncclComm_t>& comms = p.comms;
    std::vector<cudaStream_t>& streams = p.streams;
    std::vector<gyre::FakeGraph>& graphs = p.graphs;
    RANK_CHECK(gyre::fakeLaunchGraph(graphs[0], streams[0]) == 0, "launch");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto start = std::chrono::steady_clock::now();
    ncclCommAbort(comms[0]);
    const bool finished = finishesWithin(streams[0], 20);
    const double took = secondsSince(start);
    ncclCommAbort(comms[1]);
    RANK_CHECK(finished && took < 5, "rank 0's graph ran on %.1f s after ncclCommAbort (GYRE_TIMEOUT 60 s)", took);
    return 0;
  }, waitOptions("8", "60"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with one hardware queue, ncclWaitSignal on a rank's stream lets the signalling rank's stream run, and "
          "a signal that never comes fails the waiter after GYRE_TIMEOUT naming the peer",
          "[device][queues][device_api][timeout]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    std::vector<ncclComm_t> comms(2, nullptr);
    int devices[2] = {0, 0};
    RANK_CHECK(ncclCommInitAll(comms.data(), 2, devices) == ncclSuccess, "init: %s", lastError().c_str());
    void* bufs[2] = {nullptr, nullptr};
    ncclWindow_t wins[2] = {nullptr, nullptr};
    for (auto& p : bufs) RANK_CHECK(ncclMemAlloc(&p, 4096) == ncclSuccess, "alloc");
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group");
    for (int r = 0; r < 2; ++r) ncclCommWindowRegister(comms[r], bufs[r], 4096, &wins[r], 0);
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "register: %s", lastError().c_str());
    cudaStream_t waiter = newStream(), signaller = newStream();  // one queue: the signal queues behind the wait
    std::vector<uint32_t> words(64);
    for (size_t i = 0; i < words.size(); ++i) words[i] = uint32_t(i * 2654435761u);
    ncclWaitSignalDesc_t wait{};
    wait.opCnt = 1;
    wait.peer = 1;
    RANK_CHECK(ncclWaitSignal(1, &wait, comms[0], waiter) == ncclSuccess, "wait: %s", lastError().c_str());
    RANK_CHECK(ncclPutSignal(words.data(), words.size(), ncclUint32, 0, wins[1], 128, 0, 0, 0, comms[1],
                             signaller) == ncclSuccess, "put: %s", lastError().c_str());
    const bool signalled = finishesWithin(signaller, 10);
    const bool waited = finishesWithin(waiter, 10);
    if (!signalled || !waited) {
      // A wait that held the queue: release it by hand so the process ends.
      __atomic_store_n(comms[0]->signals->mine + 1, 1u << 30, __ATOMIC_RELEASE);
      rt()->streamSynchronize(waiter);
      rt()->streamSynchronize(signaller);
    }
    RANK_CHECK(signalled && waited, "the put and signal on rank 1's stream %s behind rank 0's wait",
               signalled ? "finished, but the wait did not end" : "never ran");
    for (size_t i = 0; i < words.size(); ++i)
      RANK_CHECK(static_cast<uint32_t*>(bufs[0])[32 + i] == words[i], "word %zu of the put is wrong", i);
    RANK_CHECK(asyncErrorOf(comms[0]).empty(), "a wait that was satisfied failed: %s", asyncErrorOf(comms[0]).c_str());
    // A second signal that rank 1 never sends.
    auto start = std::chrono::steady_clock::now();
    RANK_CHECK(ncclWaitSignal(1, &wait, comms[0], waiter) == ncclSuccess, "wait: %s", lastError().c_str());
    const bool gaveUp = finishesWithin(waiter, 20);
    const double took = secondsSince(start);
    const std::string error = asyncErrorOf(comms[0]);
    for (ncclComm_t c : comms) ncclCommAbort(c);
    for (auto& p : bufs) ncclMemFree(p);
    RANK_CHECK(gaveUp && took >= 1.5, "the unsatisfied wait ended after %.1f s (GYRE_TIMEOUT 2 s)%s", took,
               gaveUp ? "" : ", or never");
    RANK_CHECK(says(error, "ncclWaitSignal") && says(error, "GYRE_TIMEOUT") && says(error, "rank 1's signals"),
               "the waiter's error does not name the wait and the peer: '%s'", error.c_str());
    return 0;
  }, waitOptions("1", "2"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("with one hardware queue, a collective captured between ranks of one process is refused naming "
          "CUDA_DEVICE_MAX_CONNECTIONS, and the same calls uncaptured run right",
          "[device][graph][queues]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    const int n = 3;
    const size_t count = 997;
    std::vector<ncclComm_t> comms(n, nullptr);
    std::vector<int> devices(n, 0);
    RANK_CHECK(ncclCommInitAll(comms.data(), n, devices.data()) == ncclSuccess, "init: %s", lastError().c_str());
    std::vector<cudaStream_t> streams(n);
    std::vector<std::vector<float>> in(n, std::vector<float>(count * n)), sum(in);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count * n; ++i) in[r][i] = float((r * 7919 + int(i) * 13) % 4096);
    std::vector<gyre::FakeGraph> graphs(n);
    for (int r = 0; r < n; ++r) {
      streams[r] = newStream();
      RANK_CHECK(gyre::fakeBeginCapture(streams[r], &graphs[r]) == 0, "begin capture");
    }
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    for (int r = 0; r < n; ++r)
      ncclAllReduce(in[r].data(), sum[r].data(), count * n, ncclFloat32, ncclSum, comms[r], streams[r]);
    const ncclResult_t captured = ncclGroupEnd();
    const std::string text = lastError();
    for (int r = 0; r < n; ++r)
      RANK_CHECK(gyre::fakeEndCapture(streams[r]) == 0, "the refusal invalidated rank %d's capture", r);
    RANK_CHECK(captured == ncclInvalidUsage, "a captured AllReduce between ranks of one process was taken (%d)",
               int(captured));
    RANK_CHECK(says(text, "CUDA_DEVICE_MAX_CONNECTIONS=1") && says(text, "AllReduce") && says(text, "rank 0"),
               "the refusal does not say why: '%s'", text.c_str());
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    for (int r = 0; r < n; ++r)
      RANK_CHECK(ncclAllReduce(in[r].data(), sum[r].data(), count * n, ncclFloat32, ncclSum, comms[r], streams[r]) ==
                     ncclSuccess, "allreduce of rank %d: %s", r, lastError().c_str());
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
    for (int r = 0; r < n; ++r) RANK_CHECK(finishesWithin(streams[r], 20), "rank %d's AllReduce hangs", r);
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count * n; ++i) {
        const float want = in[0][i] + in[1][i] + in[2][i];
        RANK_CHECK(sum[r][i] == want, "rank %d's sum at %zu is %g, not %g", r, i, sum[r][i], want);
      }
    for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
    return 0;
  }, waitOptions("1", "10"));
  INFO(result.describe());
  CHECK(result.allOk());
}
