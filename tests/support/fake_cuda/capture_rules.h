// CUDA's stream-capture rules, as the fake CUDA runtime enforces them: which
// calls a capture forbids to which threads, what a forbidden call does to the
// capture, and how a capture spreads across streams through events. The
// fake asks these rules before every call that touches a stream or an event
// and fails a call the driver would refuse with the driver's error.
//
// The rules (CUDA runtime API, cudaStreamBeginCapture and
// cudaThreadExchangeStreamCaptureMode; programming guide, "Prohibited and
// Unhandled Operations"):
// - A thread's interaction mode (cudaThreadExchangeStreamCaptureMode,
//   Global by default) decides which captures forbid it the potentially
//   unsafe calls (cudaMalloc, cudaFree, cudaIpcOpenMemHandle, cudaEventQuery,
//   cudaStreamSynchronize): Global: its own captures not begun Relaxed, and
//   every other thread's Global capture; ThreadLocal: its own captures not
//   begun Relaxed; Relaxed: none. A forbidden call fails with
//   cudaErrorStreamCaptureUnsupported and invalidates those captures.
// - Whatever the mode: synchronizing a capturing stream fails the same way,
//   and querying an event last recorded in a capture fails with
//   cudaErrorCapturedEvent; both invalidate the capture.
// - The legacy stream (handle 0) may not be used while a blocking stream (one
//   not created non-blocking) captures: cudaErrorStreamCaptureImplicit.
// - A capture reaches another stream only when that stream waits on an event
//   recorded in the capture; the stream then captures into the same graph.
//   A capturing stream may not wait on an event recorded outside its capture
//   (cudaErrorStreamCaptureIsolation) or in another capture
//   (cudaErrorStreamCaptureMerge). Every stream that joined must be joined
//   back (the origin waits on an event recorded after its last work) before
//   the capture ends, else cudaStreamEndCapture fails with
//   cudaErrorStreamCaptureUnjoined.
// - Once invalidated, a capture's streams refuse more work
//   (cudaErrorStreamCaptureInvalidated) until cudaStreamEndCapture, which
//   fails with that error and returns no graph. A capture not begun Relaxed
//   ends only on the thread that began it (cudaErrorStreamCaptureWrongThread;
//   the fake then ends it anyway, with no graph, so no test leaves a
//   capture behind).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "include/gyre.h"

namespace gyre {
namespace fakecuda {

// cudaError_t's values for the errors of stream capture.
enum CaptureError : int {
  kCaptureOk = 0,
  kCaptureIllegalState = 401,  // cudaErrorIllegalState (ending a capture that is not under way)
  kCaptureUnsupported = 900,  // cudaErrorStreamCaptureUnsupported
  kCaptureInvalidated = 901,  // cudaErrorStreamCaptureInvalidated
  kCaptureMerge = 902,        // cudaErrorStreamCaptureMerge
  kCaptureUnmatched = 903,    // cudaErrorStreamCaptureUnmatched
  kCaptureUnjoined = 904,     // cudaErrorStreamCaptureUnjoined
  kCaptureIsolation = 905,    // cudaErrorStreamCaptureIsolation
  kCaptureImplicit = 906,     // cudaErrorStreamCaptureImplicit
  kCapturedEvent = 907,       // cudaErrorCapturedEvent
  kCaptureWrongThread = 908,  // cudaErrorStreamCaptureWrongThread
};
const char* captureErrorName(int error);
const char* captureErrorString(int error);

// cudaStreamCaptureMode's values.
enum CaptureModeValue : int { kModeGlobal = 0, kModeThreadLocal = 1, kModeRelaxed = 2 };

class CaptureRules {
 public:
  using Graph = std::vector<std::function<void()>>;

  // cudaStreamBeginCapture on `stream`, recording into `graph`.
  int begin(cudaStream_t stream, Graph* graph, int mode);
  // cudaStreamEndCapture: *members are the streams that leave capture (the
  // origin and every stream that joined); on failure the graph is emptied.
  int end(cudaStream_t stream, std::vector<cudaStream_t>* members);
  // cudaThreadExchangeStreamCaptureMode for the calling thread.
  int exchangeMode(int mode);

  // Streams made by cudaStreamCreateWithFlags(cudaStreamNonBlocking) do not
  // synchronise with the legacy stream; any other handle is a blocking stream.
  void streamCreated(cudaStream_t stream);
  void streamDestroyed(cudaStream_t stream);

  // A potentially unsafe call by the calling thread.
  int unsafeCall();
  // Work enqueued on `stream` (a copy, kernel, host function, memory operation).
  int enqueue(cudaStream_t stream);
  // cudaStreamSynchronize(stream).
  int synchronize(cudaStream_t stream);
  // cudaEventRecord: *captured says the record is a node of a capture.
  int record(const void* event, cudaStream_t stream, bool* captured);
  // cudaStreamWaitEvent. *joined: `stream` now captures into that graph;
  // *edge: the wait is an edge inside one capture (nothing to run).
  // `recordedBefore`: whether the event was ever recorded outside a capture.
  int wait(cudaStream_t stream, const void* event, bool recordedBefore, Graph** joined, bool* edge);
  // cudaEventQuery.
  int query(const void* event);
  void eventDestroyed(const void* event);

 private:
  struct Member {
    uint64_t work = 0;      // captured operations on this stream
    uint64_t joinedAt = 0;  // of those, how many the origin has waited for
  };
  struct Capture {
    cudaStream_t origin = nullptr;
    int mode = kModeGlobal;
    std::thread::id owner;
    Graph* graph = nullptr;
    bool invalidated = false;
    std::map<cudaStream_t, Member> members;
  };
  struct EventRecord {
    int capture = 0;  // the capture the event was last recorded in (0: none)
    cudaStream_t stream = nullptr;
    uint64_t work = 0;  // the stream's captured operations at the record
  };

  Capture* captureOf(cudaStream_t stream);   // mutex_ held
  bool forbidsThisThread(const Capture& c);  // mutex_ held
  int invalidate(Capture* c, int error);     // mutex_ held

  std::mutex mutex_;
  int nextId_ = 1;
  std::map<int, Capture> captures_;
  std::map<cudaStream_t, int> streamCapture_;
  std::map<const void*, EventRecord> events_;
  std::map<cudaStream_t, bool> nonBlocking_;
};

}  // namespace fakecuda
}  // namespace gyre
