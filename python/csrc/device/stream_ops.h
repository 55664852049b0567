// What the backend's CUDA path needs of the CUDA runtime: devices, one
// stream of its own per device communicator, and events to order that stream
// against the caller's. An interface, so the torch-independent part of the
// CUDA path (device_comm.h, stream_work.h) runs in tests over gyre's fake
// CUDA runtime (GYRE_FAKE_CUDA=1) on machines without a GPU; the backend
// itself uses cudaStreamOps(), the CUDA runtime.
//
// Every method throws std::runtime_error naming the call and the runtime's
// reason; nothing here is on a per-element path.
#pragma once

#include <gyre.h>

namespace torch_gyre::device {

using Stream = cudaStream_t;
using Event = void*;

class StreamOps {
 public:
  virtual ~StreamOps() = default;
  virtual int currentDevice() = 0;
  virtual void setDevice(int device) = 0;
  // A non-blocking stream on the current device.
  virtual Stream createStream() = 0;
  virtual void destroyStream(Stream s) = 0;
  // An event without timing, on the current device.
  virtual Event createEvent() = 0;
  virtual void destroyEvent(Event e) = 0;
  virtual void record(Event e, Stream s) = 0;
  // Work enqueued on `s` after this call runs after what `e` recorded.
  virtual void streamWait(Stream s, Event e) = 0;
  // Whether what `e` recorded has run.
  virtual bool query(Event e) = 0;
};

// The CUDA runtime's; nullptr in a build of torch_gyre without it.
StreamOps* cudaStreamOps();

// Keeps the calling thread's current device and puts it back on scope exit,
// so creating a communicator on the group's device does not move the caller.
class DeviceScope {
 public:
  DeviceScope(StreamOps& ops, int device) : ops_(ops), saved_(ops.currentDevice()) {
    if (device != saved_) ops_.setDevice(device);
  }
  ~DeviceScope() {
    try {
      if (ops_.currentDevice() != saved_) ops_.setDevice(saved_);
    } catch (...) {  // a destructor must not throw; the caller's device is left as is
    }
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  StreamOps& ops_;
  int saved_;
};

}  // namespace torch_gyre::device
