// ncclComm's constructor and destructor live here, out of line: the
// executors' views it owns (HostComm, DeviceComm) are complete types only
// where their headers are included, which comm.h deliberately does not do.
#include "src/comm/comm.h"

#include "src/device/device_comm.h"
#include "src/host/host_comm.h"

ncclComm::ncclComm() = default;
ncclComm::~ncclComm() = default;
