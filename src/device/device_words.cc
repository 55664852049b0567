#include "src/device/device_words.h"

#include <chrono>
#include <thread>

#include "src/debug/error.h"
#include "src/device/runtime/deferred_frees.h"

namespace gyre {

ncclResult_t DeviceWordReader::start(const std::vector<Range>& ranges) {
  DeviceRuntime* rt = deviceRuntime();
  if (!host_) {
    for (const Range& r : ranges) words_ += r.second;
    void *host = nullptr, *device = nullptr;
    GYRE_CHECK(rt->allocMapped(words_ * sizeof(uint32_t), &host, &device));
    host_ = static_cast<uint32_t*>(host);
    GYRE_CHECK(rt->streamCreate(&stream_));
    GYRE_CHECK(rt->eventCreate(&done_));
  }
  uint32_t* at = host_;
  for (const Range& r : ranges) {
    GYRE_CHECK(rt->copyAsync(at, r.first, r.second * sizeof(uint32_t), stream_));
    at += r.second;
  }
  GYRE_CHECK(rt->eventRecord(done_, stream_));
  pending_ = true;
  return ncclSuccess;
}

bool DeviceWordReader::read(const std::vector<Range>& ranges, std::vector<uint32_t>* out) {
  if (!pending_) {
    // The first read, or the last one failed to start: start one now.
    if (start(ranges) != ncclSuccess) return false;
  }
  bool done = false;
  if (deviceRuntime()->eventQuery(done_, &done) != ncclSuccess || !done) return false;
  out->assign(host_, host_ + words_);
  pending_ = false;
  start(ranges);  // the next look's values, queued now
  return true;
}

DeviceWordReader::~DeviceWordReader() {
  DeviceRuntime* rt = deviceRuntime();
  // A read still queued copies from memory its owner frees or unmaps next
  // (an inbox, a peer's IPC mapping). Its owner stops the watchdog only
  // once the communicator's streams have drained, so the read is due soon:
  // it is given a moment, polled, never synchronised on.
  bool done = !pending_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    if (rt->eventQuery(done_, &done) != ncclSuccess) break;
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Still queued behind a blocked stream, the read completes after its
  // stream and event are destroyed (CUDA lets queued work finish) and before
  // its buffer is freed (the free waits for the device).
  if (done_) rt->eventDestroy(done_);
  if (stream_) rt->streamDestroy(stream_);
  freeAfterDeviceWork(DeferredFree::kMapped, host_);
}

}  // namespace gyre
