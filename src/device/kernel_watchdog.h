// Watches the peers of a communicator that runs collective kernels. A kernel
// spins on FIFO counters in device memory and cannot see that the process
// which should move them is gone; the p2p connections' sockets can (EOF),
// and carry abort notices (the rank a failing peer blames). On either, the
// watchdog sets the status block's abort word and names the rank, so a
// kernel waiting on it stops and the error (pollKernelStatus) says who,
// instead of a GYRE_TIMEOUT later. When this rank's own kernel fails (timeout,
// mismatch), it sends that notice to every peer. A peer that finished and left normally costs nothing: kernels only
// look at the abort word while they wait for something that is not there.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

struct ncclComm;

namespace gyre {

class KernelWatchdog {
 public:
  ~KernelWatchdog() { stop(); }
  // After the communicator's connections exist.
  void start(ncclComm* comm);
  // Joins the thread; safe to call twice.
  void stop();

 private:
  void run(ncclComm* comm);

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

}  // namespace gyre
