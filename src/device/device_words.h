// Reads words of device memory for a watchdog without ever waiting on a
// stream. A synchronous copy runs on a stream like any other, and a stream
// can sit behind a blocked one on a shared hardware queue
// (CUDA_DEVICE_MAX_CONNECTIONS): a watchdog stuck in it would never fail
// the communicator, and abort, which joins the watchdog, would hang. So the
// reader copies into mapped host memory on a stream of its own, records an
// event, and hands the values over once a later look finds the event
// complete; a copy still queued leaves the caller with nothing new, which a
// watchdog reads as "no progress" (so a blocked stream is reported as a
// stall after GYRE_TIMEOUT, as any other). Destroy it before the memory it
// reads goes: it gives a queued read a moment to finish first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

class DeviceWordReader {
 public:
  using Range = std::pair<const uint32_t*, size_t>;  // device words

  DeviceWordReader() = default;
  DeviceWordReader(const DeviceWordReader&) = delete;
  DeviceWordReader& operator=(const DeviceWordReader&) = delete;
  ~DeviceWordReader();

  // True with the words of `ranges` one after another in *out, as a read
  // that has completed found them; false while that read is still queued
  // or failed. Each call starts the next read when none is pending. The
  // ranges must be the same on every call.
  bool read(const std::vector<Range>& ranges, std::vector<uint32_t>* out);

 private:
  ncclResult_t start(const std::vector<Range>& ranges);

  size_t words_ = 0;
  uint32_t* host_ = nullptr;  // mapped host memory the copies land in
  StreamHandle stream_ = nullptr;
  EventHandle done_ = nullptr;
  bool pending_ = false;
};

}  // namespace gyre
