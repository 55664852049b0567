#include "src/comm/cuda_device.h"

#include <string>

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

}  // namespace gyre
