#include "src/device/device_layer.h"

#include "src/debug/error.h"
#include "src/device/direct_calls.h"
#include "src/device/kernel_calls.h"
#include "src/device/kernel_watchdog.h"
#include "src/device/runtime.h"
#include "src/device/staging.h"

namespace gyre {

ncclResult_t setupDeviceExecutors(DeviceComm* comm, bool p2pToEveryPeer, const Deadline& deadline) {
  if (!comm) return ncclSuccess;
  GYRE_CHECK(chooseDeviceExecutor(comm, p2pToEveryPeer, deadline));
  return setupDirect(comm, deadline);
}

void startDeviceWatchdog(DeviceComm* comm) {
  if (comm) startKernelWatchdog(comm);
}

ncclResult_t launchDeviceCalls(const std::vector<DeviceRequest>& calls) {
  std::vector<DeviceRequest> kernelCalls, directCalls, stagedCalls;
  for (const DeviceRequest& c : calls) {
    bool collective = c.coll != CollKind::SendRecv;
    (collective && takesDirect(c) ? directCalls : collective && c.comm->deviceKernels ? kernelCalls : stagedCalls)
        .push_back(c);
  }
  ncclResult_t r = kernelCalls.empty() ? ncclSuccess : launchKernelCalls(kernelCalls);
  // Direct calls every rank could not take join the staged ones (all ranks agree which).
  if (r == ncclSuccess && !directCalls.empty()) r = launchDirectCalls(directCalls, &stagedCalls);
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
  if (queryStreams) checkDirectFault(comm);
  return pollKernelStatus(comm, queryStreams);
}

void abortDeviceWork(DeviceComm* comm) {
  if (comm) abortKernels(comm);
}

bool drainDeviceWork(DeviceComm* comm, bool abort, double seconds) {
  if (!comm) return true;
  return drainDirect(comm, abort, seconds) && drainStaging(comm, seconds) && drainKernels(comm, abort, seconds);
}

void releaseDeviceExecutors(DeviceComm* comm, double seconds) {
  if (!comm) return;
  drainKernels(comm, true, seconds);
  drainDirect(comm, true, seconds);
}

}  // namespace gyre
