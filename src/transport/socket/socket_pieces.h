// How a large slot payload is cut across a connection's data sockets. Both
// sides compute the same cut from the slot's byte count and the socket count
// (checked equal at connect), so only the SlotMeta header crosses the wire to
// describe it, and each piece lands straight at its place in the slot.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gyre::socket_detail {

// Payloads below this go whole on the control socket, inline, as with one
// socket: handing them to helper threads would cost more in wake-ups than
// the extra cores give back.
constexpr uint32_t kSplitBytes = 64 << 10;
// Piece boundaries fall on page multiples so each copy starts aligned.
constexpr size_t kPieceAlign = 4096;
// NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD may not exceed this (NCCL's limit).
constexpr int kMaxDataSockets = 64;

// Byte range [*off, *off + *len) of piece `i` of `n`; trailing pieces may be empty.
inline void pieceRange(uint32_t bytes, int n, int i, size_t* off, size_t* len) {
  size_t per = (static_cast<size_t>(bytes) + n - 1) / n;
  per = (per + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
  const size_t begin = std::min<size_t>(static_cast<size_t>(i) * per, bytes);
  *off = begin;
  *len = std::min<size_t>(begin + per, bytes) - begin;
}

}  // namespace gyre::socket_detail
