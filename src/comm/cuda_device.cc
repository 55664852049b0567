#include "src/comm/cuda_device.h"

#include <string>

#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

ncclResult_t currentCudaDevice(int* device) {
  *device = -1;
  DeviceRuntime* rt = deviceRuntime();
  if (!rt)
    return fail(ncclInvalidUsage, "%s; for host memory use gyreCommInitRankHost", whyNoDeviceRuntime());
  return rt->currentDevice(device);
}

ncclResult_t selectCudaDevice(int device) {
  DeviceRuntime* rt = deviceRuntime();
  if (!rt)
    return fail(ncclInvalidUsage, "%s (device %d); for host memory use gyreCommInitAllHost", whyNoDeviceRuntime(),
                device);
  ncclResult_t r = rt->setDevice(device);
  if (r != ncclSuccess) {
    std::string why = lastErrorText();
    return fail(r, "%s; for host memory use gyreCommInitAllHost", why.c_str());
  }
  return ncclSuccess;
}

// Only ranks of this process: another process's memory reaches this one by
// CUDA IPC, whose mappings enable their own access
// (cudaIpcMemLazyEnablePeerAccess).
ncclResult_t enablePeerAccessInProcess(const ncclComm* comm) {
  DeviceRuntime* rt = deviceRuntime();
  if (comm->isHost || !rt) return ncclSuccess;
  const PeerInfo& self = comm->bootstrap->peers()[comm->rank];
  for (const PeerInfo& p : comm->bootstrap->peers()) {
    int device = -1;
    if (p.pid != self.pid || p.hostHash != self.hostHash || p.isHostComm || p.busId == self.busId) continue;
    if (!rt->deviceAtBusId(p.busId, &device) || device == comm->cudaDev) continue;
    if (!rt->canAccessPeer(comm->cudaDev, device)) continue;
    ncclResult_t r = rt->enablePeerAccess(comm->cudaDev, device);
    if (r != ncclSuccess) {
      std::string why = lastErrorText();
      return fail(r, "rank %d: cannot let GPU %d reach rank %d's GPU %d: %s", comm->rank, comm->cudaDev, p.rank,
                  device, why.c_str());
    }
  }
  return ncclSuccess;
}

}  // namespace gyre
