// ncclWaitSignal's waits on a stream. A wait on a peer of another process
// is a stream memory wait: that process's streams have hardware queues of
// their own. A wait on a rank of this process is the flag kernel
// (src/kernels/flag_work.h): a memory wait at the head of a hardware queue
// would hold every stream behind it, the signalling peer's too when the
// queue is shared (CUDA_DEVICE_MAX_CONNECTIONS=1, or more streams than
// queues), while a kernel leaves the head once started. The kernel gives up
// after GYRE_TIMEOUT (a peer that never signals, or work queued on this
// stream after the wait that holds the shared queue's head), failing the
// communicator by name.
#pragma once

#include <cstdint>
#include <vector>

#include "include/gyre.h"
#include "src/device/device_comm.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

struct SignalWait {
  const uint32_t* slot = nullptr;  // this rank's slot the peer writes
  uint32_t count = 0;              // until the slot reaches it (wrap-safe)
  int peer = -1;
  bool sameProcess = false;
};

ncclResult_t enqueueSignalWaits(DeviceComm* comm, const std::vector<SignalWait>& waits, StreamHandle stream);

// A signal wait's kernel that timed out fails the communicator (once),
// naming the peer and the count. Mapped host memory only, no CUDA call.
void pollSignalTimeout(DeviceComm* comm);

// Abort: the kernels' waits give up.
void abortSignalWaits(DeviceComm* comm);

}  // namespace gyre
