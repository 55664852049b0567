// Readiness of a connection's next step, from the executor's side.
#pragma once

#include "transport/transport.h"

namespace gyre {

inline bool sendSlotFree(const Connection& c) { return c.step - loadAcquire(c.fifo.head) < kFifoSlots; }
inline bool recvDataReady(const Connection& c) { return loadAcquire(c.fifo.tail) > c.step; }
inline bool sendsDrained(const Connection& c) { return loadAcquire(c.fifo.head) == c.step; }

}  // namespace gyre
