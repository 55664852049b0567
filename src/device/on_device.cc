#include "src/device/on_device.h"

#include <string>

#include "src/debug/error.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

ncclResult_t OnDevice::enter(int device, int rank) {
  DeviceRuntime* rt = deviceRuntime();
  if (switched_ || device < 0 || !rt) return ncclSuccess;
  int current = -1;
  if (rt->currentDevice(&current) == ncclSuccess && current == device) return ncclSuccess;
  ncclResult_t r = rt->setDevice(device);
  if (r != ncclSuccess) {
    std::string why = lastErrorText();
    return fail(r, "rank %d: cannot make its device %d current (CUDA issues a communicator's kernels, events and "
                "allocations on its device): %s", rank, device, why.c_str());
  }
  previous_ = current;
  switched_ = previous_ >= 0;
  return ncclSuccess;
}

OnDevice::~OnDevice() {
  if (switched_) deviceRuntime()->setDevice(previous_);
}

void enterDeviceOfThisThread(int device) {
  DeviceRuntime* rt = deviceRuntime();
  if (rt && device >= 0) rt->setDevice(device);
}

}  // namespace gyre
