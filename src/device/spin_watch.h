// What a communicator's spinning flag kernels watch and report through, in
// mapped host memory (src/kernels/flag_work.h): the host sets the abort word
// and reads a timeout's report with plain loads and stores, no CUDA call, so
// neither waits behind a stream that a blocked hardware queue holds.
#pragma once

#include <cstdint>
#include <mutex>

#include "include/gyre.h"
#include "src/kernels/flag_work.h"

namespace gyre {

class SpinWatch {
 public:
  SpinWatch() = default;
  SpinWatch(const SpinWatch&) = delete;
  SpinWatch& operator=(const SpinWatch&) = delete;
  ~SpinWatch() { release(); }

  // The mapped words, zeroed (once; later calls keep them). Made relaxed,
  // so a capture on another thread stays valid.
  ncclResult_t allocate();
  // Once every kernel that reads it has ended.
  void release();

  // What a launch of the flag kernel reads: waits give up on abort and
  // after `timeoutSeconds`, reporting here.
  void arm(FlagOps* ops, double timeoutSeconds) const;

  // Stops every wait, now and in later launches.
  void abort();

  // The first timeout's report, once: false when there is none or it was
  // taken already.
  bool takeTimeout(int* peer, uint32_t* step);

 private:
  std::mutex mutex_;
  void* host_ = nullptr;
  volatile uint32_t* abortHost_ = nullptr;
  volatile FlagTimeout* timedOutHost_ = nullptr;
  const uint32_t* abortDevice_ = nullptr;
  FlagTimeout* timedOutDevice_ = nullptr;
  bool reported_ = false;
};

}  // namespace gyre
