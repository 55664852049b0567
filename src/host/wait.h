// Readiness of a connection's next step, and publishing one, from the executor's side.
#pragma once

#include "transport/transport.h"

namespace gyre {

inline bool sendSlotFree(const Connection& c) {
  if (c.step - c.seenHead < kFifoSlots) return true;  // that load was an acquire too
  c.seenHead = loadAcquire(c.fifo.head);
  return c.step - c.seenHead < kFifoSlots;
}
// With slot lines the step's own line says it is there (its sequence word is
// stored after the payload and meta, as tail is after that).
inline bool recvDataReady(const Connection& c) {
  if (c.fifo.hasLines()) return loadAcquire(&c.fifo.lineOf(c.step).seq) > c.step;
  return loadAcquire(c.fifo.tail) > c.step;
}
// A send step is written (payload at fifo.payload(), then its meta): make it visible.
inline void publishSent(Connection& c) {
  if (c.fifo.hasLines()) storeRelease(&c.fifo.lineOf(c.step).seq, c.step + 1);
  storeRelease(c.fifo.tail, ++c.step);
}
// A received step is used up: its slot may be written again.
inline void publishConsumed(Connection& c) { storeRelease(c.fifo.head, ++c.step); }
inline bool sendsDrained(const Connection& c) { return loadAcquire(c.fifo.head) == c.step; }

}  // namespace gyre
