// Watches the peers of a communicator that runs collective kernels. A kernel
// spins on FIFO counters in device memory and cannot see that the process
// which should move them is gone; the p2p connections' sockets can (EOF),
// and carry abort notices (the rank a failing peer blames). A closed peer is
// flagged per rank (DeviceCall::peerGone: only a lane still waiting on it
// stops); a notice sets the abort word naming the blamed rank. Either way the
// error (pollKernelStatus) says who, instead of a GYRE_TIMEOUT later. A peer that finished and left normally costs nothing: kernels only
// look at the abort word while they wait for something that is not there.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "include/gyre.h"


namespace gyre {

struct DeviceComm;  // device_comm.h

// Once per communicator: when this rank's kernel gave up on a peer (timeout,
// mismatch, a peer that left, or a notice it received), sends every peer an
// abort notice blaming that rank. Called by the watchdog and by
// pollKernelStatus, so the notice leaves before the application, seeing the
// error, aborts and closes the connections.
void announceKernelFailure(DeviceComm* comm);

// This rank hit a CUDA error it cannot get past (the error text is set): the
// communicator fails with `code` and every peer is told this rank is the
// culprit, so their kernels or staged calls stop now, naming it.
void failOnDeviceError(DeviceComm* comm, ncclResult_t code);

// A kernel that faulted (an illegal address, say) leaves a sticky error in
// the context and never writes its status block; the events of the last
// launches report it. Then failOnDeviceError with ncclUnhandledCudaError and
// the CUDA text. Called by the watchdog and by pollKernelStatus.
void checkDeviceFault(DeviceComm* comm);

class KernelWatchdog {
 public:
  ~KernelWatchdog() { stop(); }
  // After the communicator's connections exist.
  void start(DeviceComm* comm);
  // Joins the thread; safe to call twice.
  void stop();

 private:
  void run(DeviceComm* comm);

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace gyre
