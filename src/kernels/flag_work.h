// Waits and writes on 32-bit flags in device memory, run by a one-thread
// kernel (src/kernels/flag_kernel.cu) instead of by stream memory operations.
// Streams of one process share the GPU's few hardware queues: a stream
// memory wait at the head of a queue holds every stream behind it, so a wait
// on a value another stream of the same process writes later can hang. A
// waiting kernel occupies one SM slot instead, and the queue moves on. Used
// where ranks of one process must order their streams by flags: graphs
// captured per rank, whose replays cannot wait on each other's events.
#pragma once

#include <cstdint>

#include "src/kernels/primitives/host_device.h"
#include "src/kernels/primitives/shared_words.h"

namespace gyre {

enum class FlagOpKind : uint8_t {
  kWait = 0,          // until (int32_t)(*flag - value) >= 0, as cuStreamWaitValue32's GEQ
  kWrite = 1,         // *flag = value, after this rank's earlier work is visible
  kWaitAndClear = 2,  // kWait, then *flag = 0 (so a replayed graph waits again)
};

struct FlagOp {
  uint32_t* flag = nullptr;
  uint32_t value = 0;
  FlagOpKind kind = FlagOpKind::kWait;
  // A wait's writer and what it stands for, for a timeout's report.
  int32_t peer = -1;
  uint32_t step = 0;
};

// Where a flag kernel's wait that timed out reports, in mapped host memory
// (the host reads it without a CUDA call, so no blocked queue delays it):
// `step` first, then the peer's rank + 1 in `peerPlusOne`, which the host
// polls.
struct FlagTimeout {
  uint32_t peerPlusOne;
  uint32_t step;
};

constexpr int kMaxFlagOps = 24;

struct FlagOps {
  FlagOp ops[kMaxFlagOps];
  int32_t n = 0;
  // Set on abort or when a peer died: waits give up.
  const volatile uint32_t* abort = nullptr;
  // A wait longer than this (GYRE_TIMEOUT; 0: none) gives up and reports in
  // `timedOut`; once a report is there every later wait of the
  // communicator gives up at once, as with streams sharing a hardware queue
  // the writer's kernel may be queued behind this one and never start.
  uint64_t timeoutNs = 0;
  volatile FlagTimeout* timedOut = nullptr;
  // Device memory set to 1 on a timeout, before the report: the abort word
  // of the work queued after this kernel (a direct share), which then skips
  // instead of running on peers' buffers that were never ready.
  uint32_t* stopOnTimeout = nullptr;

  bool add(uint32_t* flag, uint32_t value, FlagOpKind kind, int32_t peer = -1, uint32_t step = 0) {
    if (n == kMaxFlagOps) return false;
    ops[n++] = FlagOp{flag, value, kind, peer, step};
    return true;
  }
};

GYRE_HOST_DEVICE bool flagReached(uint32_t seen, uint32_t wanted) { return static_cast<int32_t>(seen - wanted) >= 0; }

// Whether a wait of `ops` must stop: aborted, or some wait timed out.
GYRE_HOST_DEVICE bool flagWaitStopped(const FlagOps& ops) {
  return (ops.abort && loadSharedWord(ops.abort)) || (ops.timedOut && loadSharedWord(&ops.timedOut->peerPlusOne));
}

}  // namespace gyre
