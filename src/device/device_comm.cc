#include "src/device/device_comm.h"

#include "src/device/copy/copy_calls.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/kernel/kernel_calls.h"
#include "src/device/spin_watch.h"
#include "src/device/staged/staging.h"

namespace gyre {

DeviceComm::DeviceComm(std::atomic<bool>& abort, std::atomic<int>& error, uint64_t& ops)
    : abortFlag(abort), asyncError(error), opCount(ops), staging(std::make_unique<StagingState>()),
      signalWatch(std::make_unique<SpinWatch>()) {}
DeviceComm::~DeviceComm() = default;

}  // namespace gyre
