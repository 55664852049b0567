// The device a communicator's work must be issued on. CUDA binds streams,
// events, allocations and kernel launches to the calling thread's current
// device: a kernel launches only into a stream of the current device, an
// event records only into a stream of its own device, and memory is
// allocated on the current device. An application may drive the ranks of
// several GPUs from one thread and leave any device current (nccl-tests -g,
// ncclCommInitAll, all ranks' calls in one ncclGroupStart/End), so every
// path that issues a communicator's work makes its device current for that
// work and the caller's current again after it, as NCCL does.
#pragma once

#include "include/gyre.h"

namespace gyre {

// `device` current on the calling thread for this scope; the device that was
// current before, current again when it ends. Costs one cudaGetDevice when
// the device is current already.
class OnDevice {
 public:
  OnDevice() = default;
  // Ignores a failure: a call issued on the wrong device then fails with
  // CUDA's error, which names it.
  explicit OnDevice(int device) { enter(device); }
  ~OnDevice();
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

  // Makes `device` current (once per scope); fails naming the rank, the
  // device and the rule when it cannot.
  ncclResult_t enter(int device, int rank = -1);

 private:
  int previous_ = -1;
  bool switched_ = false;
};

// First thing on a thread gyre starts for a communicator (watchdogs, workers,
// set-up threads): its device current, before any CUDA call. Without it the
// thread's first CUDA call makes a context on device 0 — about 0.5 GB of GPU
// 0 in every process of an 8-GPU node — and its events and allocations land
// there. Nothing for a negative device (a host communicator).
void enterDeviceOfThisThread(int device);

}  // namespace gyre
