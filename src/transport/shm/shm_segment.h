// The memory of one shared-memory connection: a header holding the FIFO's
// counters, sleeper counts, abort words and kLineSlots slot lines, then the
// lines' payload blocks (fifo.h), then kFifoSlots
// slots. It is an anonymous memfd: it never has a name in /dev/shm, so no way
// of dying (SIGKILL included) can leave it behind; it lives exactly as long
// as a process maps it or holds its descriptor.
#pragma once

#include <cstddef>
#include <cstdint>

#include "include/gyre.h"
#include "src/transport/fifo.h"

namespace gyre {

constexpr uint64_t kShmMagic = 0x3366696673657967ull;  // "gyresfi3": kLineSlots slot lines

// Written once by the sender before the receiver sees it, except where noted.
struct ShmHeader {
  uint64_t magic;
  uint64_t secret;     // the communicator's: the receiver checks it is the segment it expects
  int32_t sender;
  int32_t receiver;
  int32_t channel;
  uint32_t reserved;
  uint64_t slotBytes;
  // Each counter shares a cache line with the count of ranks sleeping on it:
  // the rank that just moved the counter owns that line, so checking for
  // sleepers after every step costs no cache miss.
  alignas(64) uint64_t tail;       // steps produced; written by the sender
  uint32_t tailSleepers;           // receivers asleep on tail (futex)
  alignas(64) uint64_t head;       // steps consumed; written by the receiver
  uint32_t headSleepers;           // senders asleep on head (futex)
  // Abort notices: the culprit rank + 1 (0: none), one word per side so a
  // rank never mistakes its own notice for its peer's.
  alignas(64) int32_t senderAbort;
  int32_t receiverAbort;
  SlotLine lines[kLineSlots];  // each step's metadata, sequence word and inline payload
};

// The lines' payload blocks start on a page of their own, away from the
// header's hot cache lines, and the slots after them.
constexpr size_t kShmLinePayloadsOffset = (sizeof(ShmHeader) + 4095) / 4096 * 4096;
constexpr size_t kShmSlotsOffset = kShmLinePayloadsOffset + kLinePayloadSlots * kLinePayloadBytes;

inline size_t shmSegmentBytes(size_t slotBytes) { return kShmSlotsOffset + kFifoSlots * slotBytes; }

// One process's mapping of a segment.
struct ShmMapping {
  void* base = nullptr;
  size_t bytes = 0;
  ShmHeader* header() const { return static_cast<ShmHeader*>(base); }
  // Points the executor's view of the FIFO into the mapping.
  void fillFifo(Fifo* fifo) const;
  void unmap();
};

// Creates and maps a zeroed segment with its header filled in; *fd is the
// memfd to hand to the receiver (the caller closes it).
ncclResult_t createShmSegment(uint64_t secret, int sender, int receiver, int channel, size_t slotBytes, int* fd,
                              ShmMapping* out);
// Maps a segment received from `sender` and checks that it is the one this
// connection expects (size and header).
ncclResult_t mapShmSegment(int fd, uint64_t secret, int sender, int receiver, int channel, size_t slotBytes,
                           ShmMapping* out);

}  // namespace gyre
