// Readiness of a connection's next step, and publishing one, from the executor's side.
#pragma once

#include <cstdint>

#include "src/transport/transport.h"

namespace gyre {

// How many steps a step of `bytes` may be ahead of head (fifo.h): one that
// fits its line needs only a free line, one of up to kLinePayloadBytes a
// payload block too, any other a slot.
inline uint64_t sendDepthFor(const Connection& c, size_t bytes) {
  if (!c.fifo.hasLines() || bytes > kLinePayloadBytes) return kFifoSlots;
  return bytes <= kLineInlineBytes ? kLineSlots : kLinePayloadSlots;
}
inline bool sendSlotFree(const Connection& c, size_t bytes = SIZE_MAX) {
  const uint64_t depth = sendDepthFor(c, bytes);
  c.sendDepth = depth;
  if (c.step - c.seenHead < depth) return true;  // that load was an acquire too
  c.seenHead = loadAcquire(c.fifo.head);
  return c.step - c.seenHead < depth;
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
inline void publishConsumed(Connection& c) {
  storeRelease(c.fifo.head, ++c.step);
  // The next step's line: a sender running ahead (a Broadcast root, up to
  // kLineSlots calls) has written it already, and the receiver's next call
  // then finds it cached. 4-rank Broadcasts of 8-512 B 1.06-1.35x
  // (interleaved A/B, 3 runs); 2 ranks even within the noise.
  if (c.fifo.hasLines()) __builtin_prefetch(&c.fifo.lineOf(c.step));
}
inline bool sendsDrained(const Connection& c) { return loadAcquire(c.fifo.head) == c.step; }

}  // namespace gyre
