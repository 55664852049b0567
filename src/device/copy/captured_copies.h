// Send/recv between ranks of one process on one GPU, captured into CUDA
// graphs one rank per graph (as nccl-tests and PyTorch capture): the pair
// still meets in the communicator's CopyExchange when the calls are
// captured, but the graphs' launches cannot wait on each other's events, so
// each rank's batch becomes one point-to-point kernel whose pairs meet
// through flags (src/kernels/pair_copy_work.h). A flag wait in a kernel holds
// SM slots, not a hardware queue that the peer's stream may share (see
// src/kernels/flag_work.h). Ranks of one process on different GPUs stage when
// captured.
#pragma once

#include <functional>
#include <mutex>
#include <vector>

#include "include/gyre.h"
#include "src/kernels/pair_copy_work.h"
#include "src/device/device_comm.h"

namespace gyre {

// What a communicator's captured pairs own for its life: graphs may be
// launched again at any time until destroy.
struct CapturedCopies {
  std::mutex mutex;
  std::vector<void*> blocks;          // device allocations of flag slots and scratch copies
  std::vector<PairFlags*> freeFlags;  // slots carved out and not yet owned by a pair
  // The word the kernels' waits watch, in mapped host memory: abort stores
  // it from the host, so it reaches the kernels even while every stream of
  // the device (the private one of copySync too) waits behind a blocked one.
  uint32_t* abort = nullptr;          // as the device addresses it
  volatile uint32_t* abortHost = nullptr;
  // The next word of the same mapping: a kernel wait that timed out stores
  // its peer's rank + 1 there (PairCopyWork::timedOut).
  volatile uint32_t* timedOutHost = nullptr;
  bool timeoutReported = false;
};

// Queues the captured calls of one batch (group order) between ranks of
// this process on this GPU: pairs them and launches each rank's kernel. The
// first sides' waits for their peers' calls go to `after`.
ncclResult_t copyCapturedInProcess(const std::vector<const DeviceRequest*>& calls,
                                   std::vector<std::function<ncclResult_t()>>* after);

// Abort: releases the kernels' waits. Destroy: frees the flags and copies.
void abortCapturedCopies(CapturedCopies* c);
// A point-to-point kernel's wait that timed out fails the communicator
// (once), naming the peer it waited for.
void pollCapturedCopies(DeviceComm* comm);
void releaseCapturedCopies(CapturedCopies* c);

}  // namespace gyre
