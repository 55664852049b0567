// ncclComm's constructor and destructor live here, out of line: the
// executors' views it owns (HostComm, DeviceComm) are complete types only
// where their headers are included, which comm.h deliberately does not do.
#include "src/comm/comm.h"

#include "src/device/device_comm.h"
#include "src/host/host_comm.h"

#include <atomic>

namespace {
std::atomic<uint64_t> nextCommSerial{1};  // 0 means "no communicator" to the repeat cache
}  // namespace

ncclComm::ncclComm() : serial(nextCommSerial.fetch_add(1, std::memory_order_relaxed)) {}
ncclComm::~ncclComm() = default;
