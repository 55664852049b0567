// An outbox: shareable memory (src/host/shareable_memory.h) where an owner
// of private (heap) elements stages a piece it announces to several peers
// (AllGather single copy by value on 3+ ranks), so the piece is copied once
// and every peer reads it through its mapping, instead of being copied into
// each peer's FIFO (n - 1 copies).
//
// A communicator keeps one per channel (HostComm::outboxes): lanes come and
// go with call shapes, the outbox stays, so its pages are faulted in once.
// It holds kOutboxSlots pieces: bounded whatever the call's size, and small
// enough to stay in the caches. A slot is written
// again only once every peer it was announced to has consumed that
// announcement (the connection's head passed its step), which holds across
// calls too. Where the slot is still being read, or the piece does not fit
// a slot, the announcement goes by value as before: the owner never waits
// for the outbox. Lanes of one channel run one after another, so one lane
// at a time uses a channel's outbox.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "src/transport/transport.h"

namespace gyre {

// Pieces from this size go through the outbox; smaller ones stay in the
// FIFO, whose slots are warm in the caches.
constexpr size_t kOutboxMinBytes = 128 << 10;
// Twice a FIFO's depth: an owner is at most kFifoSlots steps ahead on each
// connection, so the slot it comes back to has been read by all but a
// lagging peer.
constexpr int kOutboxSlots = 2 * kFifoSlots;

class Outbox {
 public:
  Outbox() = default;
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;
  ~Outbox();

  // Copies `bytes` at `src` into the lowest free slot for an announcement on
  // `out`'s current step and returns that slot, or -1 when every slot is
  // still being read, the piece does not fit a slot or no memory could be
  // had (the caller sends by value).
  int stage(const void* src, size_t bytes, const Connection& out);
  // The same piece announced on another connection's current step.
  const void* share(int slot, const Connection& out);
  const void* slotData(int slot) const { return base_ + static_cast<size_t>(slot) * slotBytes_; }

 private:
  struct Reader {
    const Connection* conn;
    uint64_t step;  // the announcement's step on conn: read once head passes it
  };
  bool slotFree(int slot) const;
  bool allocate(size_t slotBytes);

  char* base_ = nullptr;
  size_t slotBytes_ = 0;
  bool unavailable_ = false;  // the allocation failed: stop trying
  std::vector<Reader> readers_[kOutboxSlots];
};

// A communicator's outboxes, one per channel, made on first use.
class Outboxes {
 public:
  Outbox& forChannel(int channel) {
    if (static_cast<size_t>(channel) >= boxes_.size()) boxes_.resize(channel + 1);
    if (!boxes_[channel]) boxes_[channel] = std::make_unique<Outbox>();
    return *boxes_[channel];
  }

 private:
  std::vector<std::unique_ptr<Outbox>> boxes_;
};

}  // namespace gyre
