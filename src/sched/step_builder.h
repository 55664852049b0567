// Shorthand for schedule builders.
#pragma once

#include <algorithm>
#include <cstddef>

#include "src/sched/step.h"

namespace gyre {

inline Step step(StepKind kind, uint8_t srcBuf, size_t srcOff, uint8_t dstBuf, size_t dstOff, size_t count,
                 uint8_t flags) {
  Step s{};
  s.kind = kind;
  s.srcBuffer = srcBuf;
  s.dstBuffer = dstBuf;
  s.flags = flags;
  s.count = static_cast<uint32_t>(count);
  s.srcOffset = srcOff;
  s.dstOffset = dstOff;
  return s;
}

// The step on connections: sendConn/recvConn index the lane's send and
// receive arrays.
inline Step onConns(Step s, int sendConn, int recvConn) {
  s.sendConn = static_cast<uint8_t>(sendConn);
  s.recvConn = static_cast<uint8_t>(recvConn);
  return s;
}

// Calls fn(offset, n) for each piece of at most pieceElems elements of
// [0, count), in order.
template <typename Fn>
void forEachPiece(size_t count, size_t pieceElems, Fn fn) {
  for (size_t off = 0; off < count; off += pieceElems) fn(off, std::min(pieceElems, count - off));
}

}  // namespace gyre
