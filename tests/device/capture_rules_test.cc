// The fake CUDA runtime's stream-capture rules (tests/support/fake_cuda/
// capture_rules.h), one case per rule: the fake refuses, with the driver's
// error, what CUDA's driver refuses during a capture, and allows what it
// allows. gyre's device tests rely on these rules to find capture hazards
// before a GPU does.
#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace {

using gyre::CaptureMode;
using gyre::DeviceRuntime;
using gyre::FakeGraph;

constexpr int kInvalidated = 901;  // cudaErrorStreamCaptureInvalidated
constexpr int kUnjoined = 904;     // cudaErrorStreamCaptureUnjoined
constexpr int kWrongThread = 908;  // cudaErrorStreamCaptureWrongThread

// Handles the fake takes as blocking streams (cudaStreamCreate's kind), one
// range per case so no case sees another's streams.
cudaStream_t stream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

DeviceRuntime* rt() {
  DeviceRuntime* r = gyre::deviceRuntime();
  REQUIRE(r != nullptr);
  return r;
}

std::string lastError() { return ncclGetLastError(nullptr); }
bool says(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

// Runs `fn` on a thread of its own with the given interaction mode.
template <typename Fn>
void onOtherThread(CaptureMode mode, Fn fn) {
  std::thread([&] {
    CaptureMode m = mode;
    rt()->exchangeCaptureMode(&m);
    fn();
  }).join();
}

}  // namespace

TEST_CASE("cudaMalloc, cudaFree, cudaIpcOpenMemHandle and cudaStreamSynchronize on the capturing thread fail with "
          "cudaErrorStreamCaptureUnsupported and invalidate the capture", "[device][capture]") {
  void* held = nullptr;
  REQUIRE(rt()->deviceAlloc(64, &held) == ncclSuccess);
  for (int call = 0; call < 4; ++call) {
    CAPTURE(call);
    for (int mode : {gyre::kFakeCaptureGlobal, gyre::kFakeCaptureThreadLocal}) {
      CAPTURE(mode);
      cudaStream_t s = stream(100 + call * 2 + mode);
      FakeGraph graph;
      REQUIRE(gyre::fakeBeginCapture(s, &graph, mode) == 0);
      void* p = nullptr;
      gyre::IpcHandle handle{};
      ncclResult_t r = call == 0   ? rt()->deviceAlloc(64, &p)
                       : call == 1 ? rt()->deviceFree(held)
                       : call == 2 ? rt()->ipcOpenHandle(handle, &p)
                                   : rt()->streamSynchronize(stream(199));
      CHECK(r == ncclUnhandledCudaError);
      CHECK(says(lastError(), "cudaErrorStreamCaptureUnsupported"));
      // The invalidated capture takes no more work, and its end fails.
      CHECK(rt()->copyAsync(&p, &held, sizeof(p), s) == ncclUnhandledCudaError);
      CHECK(says(lastError(), "cudaErrorStreamCaptureInvalidated"));
      CHECK(gyre::fakeEndCapture(s) == kInvalidated);
      CHECK(graph.ops.empty());
    }
  }
  REQUIRE(rt()->deviceFree(held) == ncclSuccess);
}

TEST_CASE("a Relaxed capture, or a thread switched to Relaxed mode, may allocate and synchronize other streams",
          "[device][capture]") {
  FakeGraph graph;
  cudaStream_t s = stream(200);
  REQUIRE(gyre::fakeBeginCapture(s, &graph, gyre::kFakeCaptureRelaxed) == 0);
  void* p = nullptr;
  CHECK(rt()->deviceAlloc(64, &p) == ncclSuccess);
  CHECK(rt()->deviceFree(p) == ncclSuccess);
  CHECK(rt()->streamSynchronize(stream(201)) == ncclSuccess);
  CHECK(gyre::fakeEndCapture(s) == 0);

  REQUIRE(gyre::fakeBeginCapture(s, &graph) == 0);
  CaptureMode mode = CaptureMode::Relaxed;
  REQUIRE(rt()->exchangeCaptureMode(&mode) == ncclSuccess);
  CHECK(mode == CaptureMode::Global);  // CUDA's default
  CHECK(rt()->deviceAlloc(64, &p) == ncclSuccess);
  CHECK(rt()->deviceFree(p) == ncclSuccess);
  REQUIRE(rt()->exchangeCaptureMode(&mode) == ncclSuccess);
  CHECK(mode == CaptureMode::Relaxed);
  CHECK(gyre::fakeEndCapture(s) == 0);
}

TEST_CASE("another thread's cudaEventQuery breaks a Global capture unless that thread is ThreadLocal or Relaxed, "
          "and never a ThreadLocal capture", "[device][capture]") {
  gyre::EventHandle e = nullptr;
  REQUIRE(rt()->eventCreate(&e) == ncclSuccess);
  REQUIRE(rt()->eventRecord(e, stream(300)) == ncclSuccess);
  REQUIRE(rt()->streamSynchronize(stream(300)) == ncclSuccess);
  struct Case {
    int captureMode;
    CaptureMode queryMode;
    bool refused;
  };
  for (Case c : {Case{gyre::kFakeCaptureGlobal, CaptureMode::Global, true},
                 Case{gyre::kFakeCaptureGlobal, CaptureMode::ThreadLocal, false},
                 Case{gyre::kFakeCaptureGlobal, CaptureMode::Relaxed, false},
                 Case{gyre::kFakeCaptureThreadLocal, CaptureMode::Global, false}}) {
    CAPTURE(c.captureMode, int(c.queryMode));
    FakeGraph graph;
    cudaStream_t s = stream(301);
    REQUIRE(gyre::fakeBeginCapture(s, &graph, c.captureMode) == 0);
    ncclResult_t r = ncclSuccess;
    bool done = false;
    std::string text;
    onOtherThread(c.queryMode, [&] {
      r = rt()->eventQuery(e, &done);
      text = lastError();
    });
    CHECK((r != ncclSuccess) == c.refused);
    if (c.refused) CHECK((says(text, "cudaEventQuery failed") && says(text, "cudaErrorStreamCaptureUnsupported")));
    else CHECK(done);
    CHECK(gyre::fakeEndCapture(s) == (c.refused ? kInvalidated : 0));
  }
  rt()->eventDestroy(e);
}

TEST_CASE("synchronizing a capturing stream or querying an event recorded in a capture fails even in Relaxed mode",
          "[device][capture]") {
  for (int mode : {gyre::kFakeCaptureGlobal, gyre::kFakeCaptureRelaxed}) {
    CAPTURE(mode);
    FakeGraph graph;
    cudaStream_t s = stream(400 + mode);
    REQUIRE(gyre::fakeBeginCapture(s, &graph, mode) == 0);
    CHECK(rt()->streamSynchronize(s) == ncclUnhandledCudaError);
    CHECK(says(lastError(), "cudaErrorStreamCaptureUnsupported"));
    CHECK(gyre::fakeEndCapture(s) == kInvalidated);

    gyre::EventHandle e = nullptr;
    REQUIRE(rt()->eventCreate(&e) == ncclSuccess);
    REQUIRE(gyre::fakeBeginCapture(s, &graph, mode) == 0);
    REQUIRE(rt()->eventRecord(e, s) == ncclSuccess);
    bool done = false;
    onOtherThread(CaptureMode::Relaxed, [&] {
      CHECK(rt()->eventQuery(e, &done) == ncclUnhandledCudaError);
      CHECK(says(lastError(), "cudaErrorCapturedEvent"));
    });
    CHECK(gyre::fakeEndCapture(s) == kInvalidated);
    rt()->eventDestroy(e);
  }
}

TEST_CASE("the legacy stream may not be used while a blocking stream captures, but may beside a non-blocking one",
          "[device][capture]") {
  int a = 1, b = 0;
  FakeGraph graph;
  REQUIRE(gyre::fakeBeginCapture(stream(500), &graph) == 0);
  CHECK(rt()->copyAsync(&b, &a, sizeof(a), nullptr) == ncclUnhandledCudaError);
  CHECK(says(lastError(), "cudaErrorStreamCaptureImplicit"));
  CHECK(gyre::fakeEndCapture(stream(500)) == kInvalidated);

  gyre::StreamHandle nonBlocking = nullptr;
  REQUIRE(rt()->streamCreate(&nonBlocking) == ncclSuccess);
  REQUIRE(gyre::fakeBeginCapture(nonBlocking, &graph) == 0);
  CHECK(rt()->copyAsync(&b, &a, sizeof(a), nullptr) == ncclSuccess);
  CHECK(gyre::fakeEndCapture(nonBlocking) == 0);
  REQUIRE(rt()->streamSynchronize(nullptr) == ncclSuccess);
  CHECK(b == 1);
  rt()->streamDestroy(nonBlocking);
}

TEST_CASE("a capture reaches another stream only through an event, must join it back, and replays both streams' "
          "work", "[device][capture]") {
  cudaStream_t origin = stream(600), side = stream(601);
  gyre::EventHandle fork = nullptr, join = nullptr;
  REQUIRE(rt()->eventCreate(&fork) == ncclSuccess);
  REQUIRE(rt()->eventCreate(&join) == ncclSuccess);
  int src = 7, mid = 0, dst = 0;
  for (bool joinBack : {false, true}) {
    CAPTURE(joinBack);
    FakeGraph graph;
    REQUIRE(gyre::fakeBeginCapture(origin, &graph) == 0);
    REQUIRE(rt()->eventRecord(fork, origin) == ncclSuccess);
    REQUIRE(rt()->streamWaitEvent(side, fork) == ncclSuccess);
    bool capturing = false;
    REQUIRE(rt()->isCapturing(side, &capturing) == ncclSuccess);
    CHECK(capturing);  // joined through the event
    REQUIRE(rt()->copyAsync(&mid, &src, sizeof(src), side) == ncclSuccess);
    if (joinBack) {
      REQUIRE(rt()->eventRecord(join, side) == ncclSuccess);
      REQUIRE(rt()->streamWaitEvent(origin, join) == ncclSuccess);
    }
    REQUIRE(rt()->copyAsync(&dst, &mid, sizeof(mid), origin) == ncclSuccess);
    CHECK(gyre::fakeEndCapture(origin) == (joinBack ? 0 : kUnjoined));
    REQUIRE(rt()->isCapturing(side, &capturing) == ncclSuccess);
    CHECK_FALSE(capturing);  // the end takes every joined stream out of capture
    CHECK(dst == 0);         // captured, not run
    if (!joinBack) continue;
    for (int launch = 1; launch <= 3; ++launch) {
      src = 7 * launch;
      REQUIRE(gyre::fakeLaunchGraph(graph, origin) == 0);
      REQUIRE(rt()->streamSynchronize(origin) == ncclSuccess);
      CHECK(dst == 7 * launch);
    }
  }
  rt()->eventDestroy(fork);
  rt()->eventDestroy(join);
}

TEST_CASE("a capturing stream may not wait on work outside its capture, and two captures may not merge",
          "[device][capture]") {
  gyre::EventHandle outside = nullptr, inside = nullptr;
  REQUIRE(rt()->eventCreate(&outside) == ncclSuccess);
  REQUIRE(rt()->eventCreate(&inside) == ncclSuccess);
  REQUIRE(rt()->eventRecord(outside, stream(700)) == ncclSuccess);
  FakeGraph graph, other;
  REQUIRE(gyre::fakeBeginCapture(stream(701), &graph) == 0);
  CHECK(rt()->streamWaitEvent(stream(701), outside) == ncclUnhandledCudaError);
  CHECK(says(lastError(), "cudaErrorStreamCaptureIsolation"));
  CHECK(gyre::fakeEndCapture(stream(701)) == kInvalidated);

  REQUIRE(gyre::fakeBeginCapture(stream(702), &graph) == 0);
  REQUIRE(gyre::fakeBeginCapture(stream(703), &other) == 0);
  REQUIRE(rt()->eventRecord(inside, stream(702)) == ncclSuccess);
  CHECK(rt()->streamWaitEvent(stream(703), inside) == ncclUnhandledCudaError);
  CHECK(says(lastError(), "cudaErrorStreamCaptureMerge"));
  CHECK(gyre::fakeEndCapture(stream(702)) == kInvalidated);
  CHECK(gyre::fakeEndCapture(stream(703)) == kInvalidated);
  rt()->eventDestroy(outside);
  rt()->eventDestroy(inside);
}

TEST_CASE("a Global or ThreadLocal capture ends only on the thread that began it; a Relaxed one on any",
          "[device][capture]") {
  for (int mode : {gyre::kFakeCaptureGlobal, gyre::kFakeCaptureThreadLocal, gyre::kFakeCaptureRelaxed}) {
    CAPTURE(mode);
    FakeGraph graph;
    cudaStream_t s = stream(800 + mode);
    REQUIRE(gyre::fakeBeginCapture(s, &graph, mode) == 0);
    int ended = -1;
    std::thread([&] { ended = gyre::fakeEndCapture(s); }).join();
    CHECK(ended == (mode == gyre::kFakeCaptureRelaxed ? 0 : kWrongThread));
    if (ended != 0) CHECK(std::string(gyre::fakeCudaErrorName(ended)) == "cudaErrorStreamCaptureWrongThread");
  }
}

TEST_CASE("another thread's cudaHostAlloc or cudaFreeHost in Global mode breaks a Global capture, and in Relaxed "
          "mode does not",
          "[device][capture]") {
  void* held = nullptr;
  REQUIRE(rt()->allocHost(64, &held) == ncclSuccess);
  for (int call = 0; call < 2; ++call) {
    for (CaptureMode mode : {CaptureMode::Global, CaptureMode::Relaxed}) {
      CAPTURE(call, int(mode));
      const bool refused = mode == CaptureMode::Global;
      FakeGraph graph;
      cudaStream_t s = stream(500 + call * 2 + (refused ? 0 : 1));
      REQUIRE(gyre::fakeBeginCapture(s, &graph) == 0);
      ncclResult_t r = ncclSuccess;
      std::string text;
      void* p = nullptr;
      onOtherThread(mode, [&] {
        if (call == 0) {
          r = rt()->allocHost(64, &p);
        } else {
          const std::string before = lastError();
          rt()->freeHost(held);  // returns nothing: a refusal shows as the thread's error
          r = lastError() != before && says(lastError(), "cudaFreeHost") ? ncclUnhandledCudaError : ncclSuccess;
          if (r == ncclSuccess) rt()->allocHost(64, &held);  // for the next case
        }
        text = lastError();
      });
      CHECK((r != ncclSuccess) == refused);
      if (refused) CHECK(says(text, "cudaErrorStreamCaptureUnsupported"));
      CHECK(gyre::fakeEndCapture(s) == (refused ? kInvalidated : 0));
      if (p) rt()->freeHost(p);
    }
  }
  rt()->freeHost(held);
}
