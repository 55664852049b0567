#include "src/host/outbox.h"

#include <cstring>

#include "src/host/shareable_memory.h"

namespace gyre {

Outbox::~Outbox() {
  if (base_) freeShareable(base_);
}

bool Outbox::allocate(size_t slotBytes) {
  void* p = nullptr;
  if (allocShareable(kOutboxSlots * slotBytes, &p) != ncclSuccess) {
    unavailable_ = true;
    return false;
  }
  // Fault every page in now: a first touch costs far more than the copy
  // (~350 us per 128 KiB on the project's VM), and each slot would
  // otherwise pay it on its first use in a timed call.
  memset(p, 0, kOutboxSlots * slotBytes);
  base_ = static_cast<char*>(p);
  slotBytes_ = slotBytes;
  return true;
}

bool Outbox::slotFree(int slot) const {
  for (const Reader& r : readers_[slot])
    if (loadAcquire(r.conn->fifo.head) <= r.step) return false;
  return true;
}

int Outbox::stage(const void* src, size_t bytes, const Connection& out) {
  if (!base_ && (unavailable_ || !allocate(out.fifo.slotBytes))) return -1;
  if (bytes > slotBytes_) return -1;
  // The lowest free slot: when the peers keep up, a call's pieces reuse the
  // same few slots, still in the caches (rotating through all of them, as a
  // FIFO does, was 1.1x slower at 1-64 MiB on 4 ranks).
  for (int slot = 0; slot < kOutboxSlots; ++slot) {
    if (!slotFree(slot)) continue;
    memcpy(base_ + static_cast<size_t>(slot) * slotBytes_, src, bytes);
    readers_[slot].assign(1, Reader{&out, out.step});
    return slot;
  }
  return -1;
}

const void* Outbox::share(int slot, const Connection& out) {
  readers_[slot].push_back({&out, out.step});
  return slotData(slot);
}

}  // namespace gyre
