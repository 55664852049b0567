// How a large slot payload is cut across a connection's data sockets. Both
// sides compute the same cut from the slot's byte count and the socket count
// (checked equal at connect), and each piece lands straight at its place in
// the slot. A piece travels behind a PieceHeader saying which piece it is,
// which the receiver compares with its own cut before it takes the next:
// a data socket is a byte stream, and a piece longer or shorter than the
// cut would otherwise shift every later piece on that socket without a word.
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

// What goes ahead of each piece on its data socket (empty pieces too). The
// job number keeps its low 32 bits: jobs are matched in order, never 2^32 apart.
struct PieceHeader {
  uint32_t job;        // the connection's count of payloads sent in pieces before this one
  uint32_t stepBytes;  // the whole payload's bytes (the step's SlotMeta::bytes)
  uint32_t offset;     // where this piece starts in the payload
  uint32_t bytes;      // this piece's bytes, which follow the header
};
static_assert(sizeof(PieceHeader) == 16);

inline bool operator==(const PieceHeader& a, const PieceHeader& b) {
  return a.job == b.job && a.stepBytes == b.stepBytes && a.offset == b.offset && a.bytes == b.bytes;
}

// Byte range [*off, *off + *len) of piece `i` of `n`; trailing pieces may be empty.
inline void pieceRange(uint32_t bytes, int n, int i, size_t* off, size_t* len) {
  size_t per = (static_cast<size_t>(bytes) + n - 1) / n;
  per = (per + kPieceAlign - 1) / kPieceAlign * kPieceAlign;
  const size_t begin = std::min<size_t>(static_cast<size_t>(i) * per, bytes);
  *off = begin;
  *len = std::min<size_t>(begin + per, bytes) - begin;
}

}  // namespace gyre::socket_detail
