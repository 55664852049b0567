#include "src/device/stream_completions.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "src/debug/error.h"

namespace gyre {

ncclResult_t joinStreams(StreamHandle signaler, StreamHandle waiter) {
  if (signaler == waiter) return ncclSuccess;
  DeviceRuntime* rt = deviceRuntime();
  EventHandle e = nullptr;
  GYRE_CHECK(rt->eventCreate(&e));
  ncclResult_t r = rt->eventRecord(e, signaler);
  if (r == ncclSuccess) r = rt->streamWaitEvent(waiter, e);
  rt->eventDestroy(e);
  return r;
}

ncclResult_t joinOthers(const std::vector<StreamHandle>& streams, StreamHandle driver, bool intoDriver) {
  for (StreamHandle s : streams)
    if (s != driver) GYRE_CHECK(intoDriver ? joinStreams(s, driver) : joinStreams(driver, s));
  return ncclSuccess;
}

namespace {

// Work captured into a graph runs when the graph is launched, possibly many
// times: an event recorded during capture marks no run (and CUDA refuses to
// query it), and a capture may not wait on an event recorded outside it. A
// graph's runs are the application's to order and finish before destroy, as
// with NCCL.
bool capturing(StreamHandle stream) {
  bool yes = false;
  return deviceRuntime()->isCapturing(stream, &yes) == ncclSuccess && yes;
}

}  // namespace

ncclResult_t StreamCompletions::note(StreamHandle stream) {
  DeviceRuntime* rt = deviceRuntime();
  if (capturing(stream)) return ncclSuccess;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(events_.begin(), events_.end(), [&](const auto& e) { return e.first == stream; });
  if (it == events_.end()) {
    EventHandle e = nullptr;
    GYRE_CHECK(rt->eventCreate(&e));
    events_.push_back({stream, e});
    it = events_.end() - 1;
  }
  last_ = static_cast<int>(it - events_.begin());
  return rt->eventRecord(it->second, stream);
}

ncclResult_t StreamCompletions::followLast(StreamHandle stream) {
  if (capturing(stream)) return ncclSuccess;
  std::lock_guard<std::mutex> lock(mutex_);
  if (last_ < 0 || events_[last_].first == stream) return ncclSuccess;
  return deviceRuntime()->streamWaitEvent(stream, events_[last_].second);
}

bool StreamCompletions::waitAll(double seconds) {
  DeviceRuntime* rt = deviceRuntime();
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    bool all = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [stream, e] : events_) {
        bool done = false;
        if (rt->eventQuery(e, &done) != ncclSuccess) done = true;
        all &= done;
      }
    }
    if (all) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool StreamCompletions::anyFailed() {
  DeviceRuntime* rt = deviceRuntime();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [stream, e] : events_) {
    bool done = false;
    // Only a sticky error is a fault of the GPU: a query refused for another
    // reason (an application's capture under way, say) says nothing of it.
    if (rt->eventQuery(e, &done) != ncclSuccess && rt->contextBroken()) return true;
  }
  return false;
}

void StreamCompletions::destroy() {
  DeviceRuntime* rt = deviceRuntime();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [stream, e] : events_) rt->eventDestroy(e);
  events_.clear();
  last_ = -1;
}

}  // namespace gyre
