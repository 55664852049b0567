// Enqueuing flag waits and writes (src/kernels/flag_work.h) on a stream, the way
// the peers' placement asks: stream memory operations between processes
// (each process has its own hardware queues, and a memory operation costs no
// SM time slice), the flag kernel between ranks of one process (a memory
// wait could hold a queue that the writer's stream shares).
//
// Graphs captured per rank order their replays by flags that each side
// clears after its wait, so every launch of a pair of graphs meets afresh:
// a captured exchange owns its flags (a slot) for the communicator's life.
#pragma once

#include "include/gyre.h"
#include "src/kernels/flag_work.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

enum class FlagRunner { kStreamMemOps, kKernel };

ncclResult_t enqueueFlagOps(const FlagOps& ops, StreamHandle stream, FlagRunner runner);

}  // namespace gyre
