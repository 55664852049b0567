// Waiting on a connection's step counters: spin briefly (the data is often
// about to arrive), then drive progress and sleep in poll(). Every wait ends
// at GYRE_TIMEOUT or when the communicator is aborted, with an error that
// names the peer, the collective and the step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/comm/coll_kind.h"
#include "src/comm/comm.h"

namespace gyre {

// Where a wait happens, for error messages.
struct WaitSite {
  CollKind coll;
  uint64_t opCount;
  int channel;
  size_t stepIndex;
  size_t stepTotal;
};

// Until the send FIFO has a free slot for conn.step.
ncclResult_t waitSendSlot(ncclComm* comm, Connection& conn, const WaitSite& site);
// Until the receive FIFO holds step conn.step.
ncclResult_t waitRecvData(ncclComm* comm, Connection& conn, const WaitSite& site);
// Until every posted send has left this rank (the transport took it).
ncclResult_t waitSendsDrained(ncclComm* comm, Connection& conn, const WaitSite& site);

inline bool sendSlotFree(const Connection& c) { return c.step - loadAcquire(c.fifo.head) < kFifoSlots; }
inline bool recvDataReady(const Connection& c) { return loadAcquire(c.fifo.tail) > c.step; }

}  // namespace gyre
