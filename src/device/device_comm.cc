#include "src/device/device_comm.h"

#include "src/device/direct_calls.h"
#include "src/device/kernel_calls.h"
#include "src/device/staging.h"

namespace gyre {

// Out of line: the states are complete types only here.
DeviceComm::~DeviceComm() = default;

}  // namespace gyre
