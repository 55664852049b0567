// How a large slot payload is cut across a connection's data sockets. Both
// sides compute the same cut from the slot's byte count and the socket count
// (checked equal at connect), so only the SlotMeta header crosses the wire to
// describe it, and each piece lands straight at its place in the slot.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace gyre::socket_detail {

// Payloads below this go whole on the control socket, inline: handing them
// to a helper thread costs two wake-ups a step, which 64 KiB steps did not
// earn back (2-rank AllReduce of 128 KiB, 64 KiB steps: 2.8x slower through
// the helper than inline); with larger steps the overlap wins (2 ranks, 2-32
// MiB: 2-4.5x faster; docs/HOST-PERF.md, also for where it does not).
constexpr uint32_t kSplitBytes = 128 << 10;
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
