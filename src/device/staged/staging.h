// Collectives on device communicators, staged through page-locked host
// memory: each call copies its device input to a host buffer, a host
// function runs the call on the host executor (the same schedules and
// transports as host communicators), and the result is copied back. Calls
// above GYRE_STAGING_PIECE_BYTES are cut into pieces (the same element range
// of every rank's block) that flow through three streams of the
// communicator, so copies in and out overlap the transfer of other pieces;
// smaller calls stay on the user's stream. The call returns at once; the
// work completes in stream order, as with NCCL. Collectives take this path when some pair of
// ranks cannot use p2p (other hosts, NCCL_P2P_DISABLE, GYRE_DEVICE_PATH=staged),
// and send/recv always do; otherwise collectives run as kernels
// (kernel_calls.h).
//
// Each piece runs on the host executor in the communicator's worker thread
// (staging_worker.h), which the stream waits for by a flag. A call on a
// stream that captures a CUDA graph is refused: a piece waits for its peers,
// which no graph node may do (a host function may share CUDA's one callback
// thread with the peer's), and a flag's value cannot change between launches
// of a graph.
//
// A group's calls become one job, so calls on several communicators (as
// ncclCommInitAll's ranks driven from one thread) progress together in one
// host function; calls on several streams are joined with events: the first
// call's stream runs the job after every stream's input copies, and the other
// streams wait for the job before their output copies. Successive jobs of a
// communicator run in call order even when they name different streams.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <cstddef>
#include <mutex>
#include <vector>

#include "include/gyre.h"
#include "src/device/buffer_pool.h"
#include "src/device/device_comm.h"
#include "src/device/runtime/runtime.h"
#include "src/device/staged/staging_worker.h"
#include "src/device/stream_completions.h"

namespace gyre {

// Per communicator: reusable host buffers and the count of jobs in flight.
struct StagingState {
  std::mutex mutex;
  std::condition_variable idle;
  BufferPool buffers;  // host buffers; finished jobs give theirs back
  int jobsInFlight = 0;
  std::mutex executorMutex;  // one job at a time drives a communicator's connections
  // The stream of the last job: a job on another stream waits for it, so a
  // communicator's jobs run in call order whatever streams the calls name
  // (the mutex above keeps two jobs apart, not in order; on two streams they
  // raced and mismatched).
  StreamCompletions order;
  // Copy-in, host-run and copy-out streams of pipelined jobs (staging.cc),
  // made at first use and destroyed with the buffers.
  StreamHandle ownStreams[3] = {nullptr, nullptr, nullptr};
  // Collectives staged so far, every rank numbering alike: the seqNumber
  // of their profiler Coll events.
  uint64_t collsStaged = 0;
  // Runs the pieces of jobs this communicator drives (started at first use).
  StagingWorker worker;
};

// Enqueues the calls (all on device communicators) on their streams.
ncclResult_t launchStagedCalls(const std::vector<DeviceRequest>& calls);

// Waits (up to `seconds`) for the communicator's jobs to finish, then frees
// its buffers. False if jobs were still running at the deadline (their
// buffers are then left allocated rather than freed under them).
bool drainStaging(DeviceComm* comm, double seconds);

}  // namespace gyre
