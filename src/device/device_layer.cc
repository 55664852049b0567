#include "src/device/device_layer.h"

#include "src/call/datatypes.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/copy/captured_copies.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/kernel/kernel_calls.h"
#include "src/device/kernel/kernel_watchdog.h"
#include "src/device/launch_events.h"
#include "src/device/signal_waits.h"
#include "src/device/runtime/runtime.h"
#include "src/device/staged/staging.h"

namespace gyre {
namespace {

// NCCL_DEBUG=INFO: which executor each collective went to (these lists hold
// collectives only; send/recv name their path in copy_calls.cc). Direct calls that all ranks agree to stage
// are logged again there.
void logCollectivePaths(const std::vector<DeviceRequest>& kernels, const std::vector<DeviceRequest>& direct,
                        const std::vector<DeviceRequest>& staged) {
  const std::pair<const std::vector<DeviceRequest>*, const char*> groups[] = {
      {&kernels, "collective kernels over p2p FIFOs"},
      {&direct, "direct (one pass over the ranks' buffers on this GPU)"},
      {&staged, "staged through host memory"}};
  for (const auto& [calls, path] : groups)
    for (const DeviceRequest& c : *calls)
      GYRE_INFO("COLL", "%s count %zu %s on device %d: %s", collName(c.coll), c.count, datatypeName(c.datatype),
                c.comm->cudaDev, path);
}

}  // namespace

ncclResult_t setupDeviceExecutors(DeviceComm* comm, bool p2pToEveryPeer, const Deadline& deadline) {
  if (!comm) return ncclSuccess;
  GYRE_CHECK(chooseDeviceExecutor(comm, p2pToEveryPeer, deadline));
  GYRE_CHECK(setupPeerCopies(comm, deadline));
  return setupDirect(comm, deadline);
}

void startDeviceWatchdog(DeviceComm* comm) {
  if (comm) startKernelWatchdog(comm);
}

ncclResult_t launchDeviceCalls(const std::vector<DeviceRequest>& calls) {
  // The calls' profiler Coll and P2p events end once all are enqueued, as
  // NCCL's end once the group is launched (launch_events.h).
  RunScope observedRun;
  std::vector<DeviceRequest> kernelCalls, directCalls, copyCalls, stagedCalls;
  for (const DeviceRequest& c : calls) {
    if (c.coll == CollKind::SendRecv) copyCalls.push_back(c);
    else (takesDirect(c) ? directCalls : c.comm->deviceKernels ? kernelCalls : stagedCalls).push_back(c);
  }
  if (logLevel() >= LogLevel::Info) logCollectivePaths(kernelCalls, directCalls, stagedCalls);
  ncclResult_t r = kernelCalls.empty() ? ncclSuccess : launchKernelCalls(kernelCalls);
  // Direct calls every rank could not take join the staged ones (all ranks agree which).
  if (r == ncclSuccess && !directCalls.empty()) r = launchDirectCalls(directCalls, &stagedCalls);
  // Sends and receives between peers this process cannot address stage.
  if (r == ncclSuccess && !copyCalls.empty()) r = launchCopyCalls(copyCalls, &stagedCalls);
  if (r == ncclSuccess && !stagedCalls.empty()) r = launchStagedCalls(stagedCalls);
  if (r == ncclUnhandledCudaError && deviceRuntime()->contextBroken()) {
    // The context is broken (CUDA errors are sticky): the communicators
    // cannot run again, and peers waiting on this rank should hear it now.
    for (const DeviceRequest& c : calls) failOnDeviceError(c.comm, r);
  }
  return r;
}

ncclResult_t pollDeviceStatus(DeviceComm* comm, bool queryStreams) {
  if (!comm) return ncclSuccess;
  // A captured pair's or flag kernel that timed out says so in mapped host memory:
  // no CUDA call, so it is read on every poll.
  pollCapturedCopies(comm);
  pollDirectTimeout(comm);
  pollSignalTimeout(comm);
  if (!queryStreams) return pollKernelStatus(comm, false);
  // ncclCommGetAsyncError queries events from any thread, PyTorch's
  // watchdog's among them, while another may be capturing in Global mode.
  RelaxedCapture relaxed;
  checkDirectFault(comm);
  return pollKernelStatus(comm, true);
}

void abortDeviceWork(DeviceComm* comm) {
  if (!comm) return;
  abortKernels(comm);
  abortSignalWaits(comm);
}

bool drainDeviceWork(DeviceComm* comm, bool abort, double seconds) {
  if (!comm) return true;
  return drainDirect(comm, abort, seconds) && drainPeerCopies(comm, abort, seconds) && drainStaging(comm, seconds) &&
         drainKernels(comm, abort, seconds);
}

void releaseDeviceExecutors(DeviceComm* comm, double seconds) {
  if (!comm) return;
  drainKernels(comm, true, seconds);
  drainDirect(comm, true, seconds);
  drainPeerCopies(comm, true, seconds);
}

}  // namespace gyre
