#include "src/device/device_words.h"

#include "src/debug/error.h"

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
  bool done = !pending_;
  if (pending_ && rt->eventQuery(done_, &done) != ncclSuccess) done = false;
  // A copy still queued (behind a blocked stream) may land later: its
  // buffer, stream and event stay allocated rather than be freed under it.
  if (!done) return;
  if (done_) rt->eventDestroy(done_);
  if (stream_) rt->streamDestroy(stream_);
  if (host_) rt->freeMapped(host_);
}

}  // namespace gyre
