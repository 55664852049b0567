// Payloads by pointer, the executor's side (src/transport/transport.h,
// PayloadPointers): on a connection whose transport moves bytes with system
// calls (sockets), a step whose sent elements already sit in the user's
// buffer names them there instead of copying them into the slot, and a step
// that would copy a received payload into its dst offers dst to the
// transport, which then reads the payload straight into it.
//
// The one rule this adds: memory a send still reads from (head has not
// passed its step) must not be written. Schedules write each output element
// once, so this holds on its own for most of them; a step that would write
// such memory (an in-place exchange, where a rank sends x[i] and then
// writes x[i] with the reduced pair) waits until that send has left.
#pragma once

#include <cstdint>

#include "src/sched/step.h"
#include "src/transport/transport.h"

namespace gyre {

// Whether a step of kind `k` writes elements of its dst.
inline bool stepWritesDst(StepKind k) { return k != StepKind::Send && k != StepKind::RecvReduceSend; }

// Where the elements a step sends are, once it has run, if that is user
// memory: its src for a Send or CopySend whose op changes nothing on the
// way (no pre/post op), its dst for a RecvCopySend or RecvReduceCopySend
// (dst = what is sent). Null: the elements exist only in the slot.
template <typename T>
const T* sentElementsInUserMemory(StepKind k, bool pre, bool post, const T* src, const T* dst) {
  switch (k) {
    case StepKind::Send:
    case StepKind::CopySend: return pre || post ? nullptr : src;
    case StepKind::RecvCopySend:
    case StepKind::RecvReduceCopySend: return dst;
    default: return nullptr;
  }
}

// The first of `conns` that still sends from user memory overlapping
// [lo, hi), or null.
inline Connection* pendingSendOverlapping(Connection* const* conns, size_t n, const char* lo, const char* hi) {
  for (size_t i = 0; i < n; ++i) {
    Connection& c = *conns[i];
    if (!c.pointers) continue;
    for (uint64_t step = loadAcquire(c.fifo.head); step < c.step; ++step) {
      const char* from = c.pointers->sendFrom[step % kFifoSlots];
      if (from && from < hi && lo < from + c.fifo.metaOf(step).bytes) return &c;
    }
  }
  return nullptr;
}

// Offers `dst` for the payload of `in`'s next step, which a Recv or
// RecvCopySend of `bytes` waits on and would copy there.
inline void offerDestination(Connection& in, StepKind k, void* dst, uint32_t bytes) {
  if (!in.pointers || bytes < kByPointerMinBytes || (k != StepKind::Recv && k != StepKind::RecvCopySend)) return;
  in.pointers->offerStep = in.step;
  in.pointers->offerDst = static_cast<char*>(dst);
  in.pointers->offerBytes = bytes;
}

// Where `in`'s next step's payload of `bytes` is: in user memory if the
// transport took an offer, else in the FIFO.
inline const void* receivedPayload(const Connection& in, uint32_t bytes) {
  if (in.pointers)
    if (const char* at = in.pointers->recvAt[in.step % kFifoSlots]) return at;
  return in.fifo.payload(in.step, bytes);
}

}  // namespace gyre
