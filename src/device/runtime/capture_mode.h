// gyre's own CUDA calls while an application captures a graph. CUDA forbids
// "potentially unsafe" calls (cudaMalloc, cudaIpcOpenMemHandle,
// cudaEventQuery, synchronisation) to the capturing thread and, in the
// default Global mode, to every other thread while a Global capture is under
// way; a forbidden call fails and invalidates the application's capture.
// gyre's set-up work that a captured call may reach (first-use allocations,
// IPC opens) runs relaxed for its duration, and gyre's own threads
// (watchdogs, the staging worker) run relaxed for their whole life: none of
// that work is stream work a graph could record.
#pragma once

#include "src/device/runtime/runtime.h"

namespace gyre {

// The calling thread in cudaStreamCaptureModeRelaxed while this lives.
class RelaxedCapture {
 public:
  RelaxedCapture() {
    DeviceRuntime* rt = deviceRuntime();
    if (rt && rt->exchangeCaptureMode(&previous_) == ncclSuccess) runtime_ = rt;
  }
  ~RelaxedCapture() {
    if (runtime_) runtime_->exchangeCaptureMode(&previous_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  CaptureMode previous_ = CaptureMode::Relaxed;
  DeviceRuntime* runtime_ = nullptr;
};

// For a thread of gyre's own, first thing: it never captures, and its
// queries must not break an application thread's capture.
inline void relaxCaptureModeOfThisThread() {
  CaptureMode mode = CaptureMode::Relaxed;
  if (DeviceRuntime* rt = deviceRuntime()) rt->exchangeCaptureMode(&mode);
}

}  // namespace gyre
