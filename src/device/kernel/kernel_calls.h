// Collectives of device communicators that run the collective kernel: every
// call's lanes (src/enqueue: the planner's schedules over the communicator's
// p2p connections) are uploaded once per call shape and cached in device
// memory; each call then launches one kernel on the user's stream with its
// buffers, sequence number and scalar by value — or, in a group, one kernel
// carries consecutive calls of one communicator, stream, type and operator
// (src/device/kernel/fused_blocks.h says which block runs which lane). Launches return at once and
// complete in stream order; they are legal inside CUDA graph capture (the
// cached lanes live as long as the communicator).
//
// Failures inside the kernel (a peer that stalls past GYRE_TIMEOUT, an abort,
// mismatched calls) are written to a status block in mapped host memory and
// turned into the communicator's async error by pollKernelStatus().
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "include/gyre.h"
#include "src/kernels/device_work.h"
#include "src/debug/deadline.h"
#include "src/device/kernel/fused_blocks.h"
#include "src/device/kernel/kernel_watchdog.h"
#include "src/device/kernel/lane_images.h"
#include "src/device/stream_completions.h"
#include "src/device/device_comm.h"

namespace gyre {

struct KernelState {
  DeviceStatus* statusHost = nullptr;    // mapped host memory ...
  DeviceStatus* statusDevice = nullptr;  // ... and its device address
  uint32_t* peerGoneHost = nullptr;      // nranks flags after the status (DeviceCall::peerGone)
  const uint32_t* peerGoneDevice = nullptr;
  std::mutex mutex;
  // (collective, count, datatype, root, in place, allowed algorithms,
  // selection required) -> lanes in device memory.
  using Shape = std::tuple<int, size_t, int, int, bool, int, bool>;
  struct Lanes {
    LaneImage image;  // the DeviceLane array, then every lane's steps
    int count = 0;
    bool ll = false;        // the plan's protocol
    LaneConnections conns;  // per lane, the connections it uses (for fusing)
    std::vector<int> channels;  // per lane, its channel (profiler KernelCh events)
  };
  std::map<Shape, Lanes> cache;
  // The shapes of a fused launch's calls -> its blocks in device memory
  // (ok = false: these calls cannot share a launch).
  struct Blocks {
    bool ok = false;
    int nblocks = 0;
    LaneImage image;  // blockFirst, then items
    const uint32_t* blockFirst = nullptr;
    const LaneRef* items = nullptr;
  };
  std::map<std::vector<Shape>, Blocks> fusedCache;
  ImageArenas arenas;  // what the cached lanes and blocks are carved from
  StreamCompletions lastLaunch;  // destroy waits for these; a fault shows here
  // The last call launched (a fault's report names it: CUDA does not say
  // which kernel faulted, and the fault shows at a later query).
  std::atomic<uint8_t> lastColl{0};
  std::atomic<uint64_t> lastOpCount{0}, lastCount{0};
  bool errorReported = false;
  std::atomic<bool> announced{false};  // a failure was announced to the peers
  std::atomic<bool> faulted{false};    // checkDeviceFault found a sticky CUDA error
  KernelWatchdog watchdog;
};

// Decides at init (all ranks agree) whether the communicator runs kernels,
// and prepares its status block when it does. Before connections are made.
// `p2pToEveryPeer`: every edge from this rank may be a p2p connection.
ncclResult_t chooseDeviceExecutor(DeviceComm* comm, bool p2pToEveryPeer, const Deadline& deadline);

// Starts watching the peers (kernel_watchdog.h), once connections exist.
void startKernelWatchdog(DeviceComm* comm);

// Launches the calls (collectives of communicators with deviceKernels).
ncclResult_t launchKernelCalls(const std::vector<DeviceRequest>& calls);

// Turns an error the kernel reported into the communicator's async error
// (once); returns it, or ncclSuccess.
ncclResult_t pollKernelStatus(DeviceComm* comm, bool queryStreams = true);

// Makes the communicator's running and future kernels stop at their next
// wait (ncclCommAbort, ncclCommRevoke, ncclCommShrink's abort).
void abortKernels(DeviceComm* comm);

// Destroy/abort: tells running kernels to stop (abort), waits up to
// `seconds` for the launches to finish, then frees the cached lanes and the
// status block (and stops the watchdog). False if launches were still running
// (nothing is freed then). Also the clean-up of a failed init (no launches).
bool drainKernels(DeviceComm* comm, bool abort, double seconds);

}  // namespace gyre
