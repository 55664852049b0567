#include "tests/support/fake_cuda/capture_rules.h"

#include <algorithm>

namespace gyre {
namespace fakecuda {
namespace {

// cudaThreadExchangeStreamCaptureMode's per-thread state; Global is CUDA's default.
thread_local int threadMode = kModeGlobal;

}  // namespace

const char* captureErrorName(int error) {
  switch (error) {
    case kCaptureIllegalState: return "cudaErrorIllegalState";
    case kCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case kCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case kCaptureMerge: return "cudaErrorStreamCaptureMerge";
    case kCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case kCaptureUnjoined: return "cudaErrorStreamCaptureUnjoined";
    case kCaptureIsolation: return "cudaErrorStreamCaptureIsolation";
    case kCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case kCapturedEvent: return "cudaErrorCapturedEvent";
    case kCaptureWrongThread: return "cudaErrorStreamCaptureWrongThread";
    default: return error == kCaptureOk ? "cudaSuccess" : "cudaErrorUnknown";
  }
}

// The driver's own texts (cudaGetErrorString), so messages read as on a GPU.
const char* captureErrorString(int error) {
  switch (error) {
    case kCaptureIllegalState: return "the operation cannot be performed in the present state";
    case kCaptureUnsupported: return "operation not permitted when stream is capturing";
    case kCaptureInvalidated: return "operation failed due to a previous error during capture";
    case kCaptureMerge: return "operation would result in a merge of separate capture sequences";
    case kCaptureUnmatched: return "capture was not ended in the same stream as it began";
    case kCaptureUnjoined: return "capturing stream has unjoined work";
    case kCaptureIsolation: return "dependency created on uncaptured work in another stream";
    case kCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    case kCapturedEvent: return "operation not permitted on an event last recorded in a capturing stream";
    case kCaptureWrongThread: return "attempt to terminate a thread-local capture sequence from another thread";
    default: return error == kCaptureOk ? "no error" : "unknown error";
  }
}

CaptureRules::Capture* CaptureRules::captureOf(cudaStream_t stream) {
  auto it = streamCapture_.find(stream);
  return it == streamCapture_.end() ? nullptr : &captures_.at(it->second);
}

bool CaptureRules::forbidsThisThread(const Capture& c) {
  if (threadMode == kModeRelaxed || c.mode == kModeRelaxed) return false;
  if (c.owner == std::this_thread::get_id()) return true;
  return threadMode == kModeGlobal && c.mode == kModeGlobal;
}

int CaptureRules::invalidate(Capture* c, int error) {
  c->invalidated = true;
  return error;
}

int CaptureRules::begin(cudaStream_t stream, Graph* graph, int mode) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream == nullptr) return kCaptureUnsupported;  // the legacy stream cannot capture
  if (captureOf(stream)) return kCaptureIllegalState;
  const int id = nextId_++;
  Capture c;
  c.origin = stream;
  c.mode = mode;
  c.owner = std::this_thread::get_id();
  c.graph = graph;
  c.members[stream] = Member{};
  captures_.emplace(id, std::move(c));
  streamCapture_[stream] = id;
  graph->clear();
  return kCaptureOk;
}

int CaptureRules::end(cudaStream_t stream, std::vector<cudaStream_t>* members) {
  std::lock_guard<std::mutex> lock(mutex_);
  members->clear();
  auto found = streamCapture_.find(stream);
  if (found == streamCapture_.end()) return kCaptureIllegalState;
  const int id = found->second;
  Capture& c = captures_.at(id);
  if (c.origin != stream) return kCaptureUnmatched;
  int error = kCaptureOk;
  if (c.mode != kModeRelaxed && c.owner != std::this_thread::get_id()) error = kCaptureWrongThread;
  else if (c.invalidated) error = kCaptureInvalidated;
  for (const auto& [s, m] : c.members)
    if (error == kCaptureOk && s != c.origin && m.work > m.joinedAt) error = kCaptureUnjoined;
  for (const auto& [s, m] : c.members) {
    members->push_back(s);
    streamCapture_.erase(s);
  }
  for (auto& [e, r] : events_)
    if (r.capture == id) r = EventRecord{};
  if (error != kCaptureOk) c.graph->clear();
  captures_.erase(id);
  return error;
}

int CaptureRules::exchangeMode(int mode) {
  const int previous = threadMode;
  threadMode = mode;
  return previous;
}

void CaptureRules::streamCreated(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  nonBlocking_[stream] = true;
}

void CaptureRules::streamDestroyed(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  nonBlocking_.erase(stream);
}

int CaptureRules::unsafeCall() {
  std::lock_guard<std::mutex> lock(mutex_);
  int error = kCaptureOk;
  for (auto& [id, c] : captures_)
    if (forbidsThisThread(c)) error = invalidate(&c, kCaptureUnsupported);
  return error;
}

int CaptureRules::enqueue(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stream == nullptr) {
    int error = kCaptureOk;
    for (auto& [id, c] : captures_)
      for (const auto& [s, m] : c.members)
        if (!nonBlocking_.count(s)) error = invalidate(&c, kCaptureImplicit);
    return error;
  }
  Capture* c = captureOf(stream);
  if (!c) return kCaptureOk;
  if (c->invalidated) return kCaptureInvalidated;
  ++c->members[stream].work;
  return kCaptureOk;
}

int CaptureRules::synchronize(cudaStream_t stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (Capture* c = captureOf(stream)) return invalidate(c, kCaptureUnsupported);
  }
  if (int error = unsafeCall()) return error;
  if (stream == nullptr) return enqueue(nullptr);  // the legacy stream waits for every blocking stream
  return kCaptureOk;
}

int CaptureRules::record(const void* event, cudaStream_t stream, bool* captured) {
  *captured = false;
  if (int error = enqueue(stream); error != kCaptureOk) return error;
  std::lock_guard<std::mutex> lock(mutex_);
  EventRecord& r = events_[event];
  r = EventRecord{};
  auto found = streamCapture_.find(stream);
  if (found == streamCapture_.end()) return kCaptureOk;
  Member& m = captures_.at(found->second).members[stream];
  --m.work;  // a record is no work of its own
  r = EventRecord{found->second, stream, m.work};
  *captured = true;
  return kCaptureOk;
}

int CaptureRules::wait(cudaStream_t stream, const void* event, bool recordedBefore, Graph** joined, bool* edge) {
  *joined = nullptr;
  *edge = false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = events_.find(event);
  const EventRecord r = it == events_.end() ? EventRecord{} : it->second;
  Capture* waiter = stream ? captureOf(stream) : nullptr;
  if (waiter && waiter->invalidated) return kCaptureInvalidated;
  if (r.capture == 0) {
    // An event recorded outside any capture: a capture may not depend on it.
    if (waiter && recordedBefore) return invalidate(waiter, kCaptureIsolation);
    return kCaptureOk;
  }
  Capture& source = captures_.at(r.capture);
  if (source.invalidated) return kCaptureInvalidated;
  if (waiter && waiter != &source) {
    invalidate(waiter, kCaptureMerge);
    return invalidate(&source, kCaptureMerge);
  }
  *edge = true;
  if (!waiter) {
    // The stream joins the capture: its work from now on is captured too.
    streamCapture_[stream] = r.capture;
    source.members[stream] = Member{};
    *joined = source.graph;
    return kCaptureOk;
  }
  if (stream == source.origin && r.stream != source.origin) {
    Member& m = source.members[r.stream];
    m.joinedAt = std::max(m.joinedAt, r.work);
  }
  return kCaptureOk;
}

int CaptureRules::query(const void* event) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = events_.find(event);
    if (it != events_.end() && it->second.capture != 0) return invalidate(&captures_.at(it->second.capture),
                                                                          kCapturedEvent);
  }
  return unsafeCall();
}

void CaptureRules::eventDestroyed(const void* event) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.erase(event);
}

}  // namespace fakecuda
}  // namespace gyre
