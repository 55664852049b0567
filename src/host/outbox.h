// A lane's outbox: shareable memory (src/host/shareable_memory.h) where an
// owner of private (heap) elements stages a piece it announces to several
// peers (AllGather single copy by value on 3+ ranks), so the piece is copied
// once and every peer reads it through its mapping, instead of being copied
// into each peer's FIFO (n - 1 copies). The pieces of one call stay put
// until the call ends; the schedules' closing acknowledgements (kept, since
// the pieces went by reference) say every peer has read them, so the next
// call may write over them. 4 ranks on 2 cores, interleaved A/B against the
// FIFO: 1.2-1.9x at 1-64 MiB, 0.85-0.95x at 256 KiB (64 KiB pieces), hence
// the threshold. Broadcast's root stays on the FIFO: in place at 64 MiB the
// readers took 1.2-1.8x longer from a 64 MiB outbox than from FIFO slots
// that stay in the caches.
#pragma once

#include <cstddef>
#include <vector>

namespace gyre {

// Pieces from this size go through the outbox; smaller ones stay in the
// FIFO, whose slots are warm in the caches.
constexpr size_t kOutboxMinBytes = 128 << 10;
// A lane stages at most this much per call; the rest goes by value.
constexpr size_t kOutboxMaxBytes = 64 << 20;
// The first outbox; it doubles when a call needs more.
constexpr size_t kOutboxFirstBytes = 4 << 20;

class Outbox {
 public:
  Outbox() = default;
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;
  ~Outbox();

  // A new call: the last call's pieces have all been read.
  void rewind();
  // Where peers can read `bytes` at `src`: the copy made for the previous
  // announcement when it was the same piece, else a new copy. Null when
  // the outbox cannot hold it (the caller sends by value).
  const void* stage(const void* src, size_t bytes);

 private:
  bool grow(size_t need);

  char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;             // of the current buffer
  size_t stagedThisCall_ = 0;   // over all buffers
  const void* lastSrc_ = nullptr;
  size_t lastBytes_ = 0;
  const char* lastCopy_ = nullptr;
  bool unavailable_ = false;  // an allocation failed: stop trying
  // Outboxes outgrown during a call: peers may still read them until it ends.
  std::vector<char*> retired_;
};

}  // namespace gyre
