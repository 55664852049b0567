// The one shape every connection has, whatever carries the bytes: a ring of
// kFifoSlots slots plus two step counters. The producer fills slot
// tail % kFifoSlots, writes its SlotMeta, then publishes tail+1 (release); the
// consumer waits for tail > step (acquire), uses the slot, then publishes
// head+1. For shared memory both sides map the same FIFO; for a socket each
// side has its own and the transport moves slots between them. Executors only
// ever see this struct, never the transport behind it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/primitives/host_device.h"

namespace gyre {

// Steps in flight per connection (NCCL's NCCL_STEPS): a step is
// NCCL_BUFFSIZE / kFifoSlots bytes.
constexpr int kFifoSlots = 8;

// Describes the data in a slot so the receiver can check that both ranks are
// running the same collective with the same arguments.
// The sequence number keeps its low 32 bits (ranks that drift apart by 2^32
// calls are not a case) to make room for the root within the 24 bytes that
// three LL units and the device's 64-bit copies carry.
struct SlotMeta {
  uint32_t opCount;   // per-communicator collective sequence number (low 32 bits)
  uint32_t bytes;     // payload bytes in this slot
  uint64_t count;     // the collective's element count
  int32_t root;       // Broadcast/Reduce root; -1 for the other collectives
  uint8_t coll;       // CollKind
  uint8_t datatype;   // ncclDataType_t
  uint8_t redop;      // ncclRedOp_t (builtin) or 0xff
  uint8_t flags;      // kMetaAbort: the sender gave up; `count` holds the culprit rank
};
static_assert(sizeof(SlotMeta) == 24);

constexpr uint8_t kMetaAbort = 1;

// The LL protocol (device kernels only) fills a slot with 16-byte units of
// {4 data bytes, 4 flag bytes, 4 data bytes, 4 flag bytes}: a receiver polls
// the flags of the units it reads, so data needs no separate fence and tail.
// The slot's first kLLMetaUnits units carry the step's SlotMeta.
//
// LL slots are a region of their own (Fifo::llSlots), zeroed when made and
// only ever written as LL units: a flag is the step + 1, so a stale unit of
// an earlier LL step never matches. In the Simple slots a receiver polling
// for flags could take an earlier Simple step's data whose words happened
// to equal the flag (an int32 tensor of constants), or, on first use, what
// an earlier cudaMalloc left there (a destroyed communicator's LL units).
constexpr size_t kLLUnitBytes = 16;
constexpr size_t kLLUnitPayload = 8;
constexpr size_t kLLMetaUnits = 3;  // 24 bytes of SlotMeta
GYRE_HOST_DEVICE constexpr size_t llPayloadBytes(size_t slotBytes) {
  return (slotBytes / kLLUnitBytes - kLLMetaUnits) * kLLUnitPayload;
}
// LL carries small messages only, so its slots are smaller (as NCCL's LL
// buffer): at most 64 KiB, 32 KiB of payload a step.
constexpr size_t kLLMaxSlotBytes = 64 << 10;
GYRE_HOST_DEVICE constexpr size_t llSlotBytesFor(size_t slotBytes) {
  return slotBytes < kLLMaxSlotBytes ? slotBytes : kLLMaxSlotBytes;
}

// Shared memory between host ranks keeps each step's metadata in a cache line
// of its own, with the step's sequence word and room for a small payload: a
// receiver polls that one line instead of the tail counter, and a step of up
// to kLineInlineBytes needs no other line (2 ranks at 8 B crossed three lines
// per step: tail, metadata, payload).
constexpr size_t kLineInlineBytes = 32;
struct alignas(64) SlotLine {
  SlotMeta meta;
  uint64_t seq;  // the step + 1, stored (release) after the payload and meta
  char payload[kLineInlineBytes];
};
static_assert(sizeof(SlotLine) == 64);

// Shared memory keeps more lines than slots. Step k uses line k % kLineSlots;
// a payload of up to kLineInlineBytes rides in the line, one of up to
// kLinePayloadBytes in payload block k % kLinePayloadSlots
// (Fifo::linePayloads), and only a larger one in slot k % kFifoSlots. A step
// needs a free line and, if it uses one, a free block or slot, so a sender
// of steps of up to 32 bytes (a Broadcast root, a rank that finished its part
// of a call) may run up to kLineSlots steps ahead of its receiver, of up to
// 2 KiB kLinePayloadSlots, instead of kFifoSlots: with more ranks than cores
// a receiver then takes many calls' steps per time slice instead of forcing
// a context switch every 8 calls (4 ranks on 2 cores, Broadcast of 8 B:
// Open MPI's root runs hundreds of calls ahead). The depths trade that
// against cache footprint, which every call pays, since a line or block is
// cold again by the time the ring comes back to it: 256 lines and 32
// blocks made 4-rank AllGathers of 128 B-8 KiB (no run-ahead to gain)
// 0.66-0.85x as fast, 64 and 16 (4 KiB of lines, 32 KiB of blocks per
// connection, beside 8 slots of NCCL_BUFFSIZE / 8, 4 MiB by default) left
// them even and kept 4-rank Broadcasts of 8 B-2 KiB 1.5-2.3x faster. With
// 256 blocks (512 KiB a connection) 2-rank AllGathers of 512 B-8 KiB ran
// 1.5-2x slower; with a line's payload in the line's own 2 KiB stride,
// steps that use slots (8 KiB Broadcasts) cycled through 129 pages of lines.
constexpr int kLineSlots = 64;
constexpr int kLinePayloadSlots = 16;
constexpr size_t kLinePayloadBytes = 2048;
static_assert(kLineSlots % kLinePayloadSlots == 0 && kLinePayloadSlots % kFifoSlots == 0);
static_assert((kLineSlots & (kLineSlots - 1)) == 0 && (kFifoSlots & (kFifoSlots - 1)) == 0, "Fifo::metaOf masks");

struct Fifo {
  char* slots = nullptr;     // kFifoSlots * slotBytes
  size_t slotBytes = 0;
  SlotMeta* meta = nullptr;  // kFifoSlots entries (kLineSlots with lines), metaStride bytes apart
  uint64_t* tail = nullptr;  // steps produced (written by the producer)
  uint64_t* head = nullptr;  // steps consumed (written by the consumer)
  // sizeof(SlotLine) when `meta` points into SlotLines (the shared-memory
  // transport's host executor protocol; see SlotLine), else sizeof(SlotMeta).
  uint32_t metaStride = sizeof(SlotMeta);
  // With lines: kLinePayloadSlots payload blocks of kLinePayloadBytes.
  char* linePayloads = nullptr;
  // The LL protocol's slots (p2p connections only): kFifoSlots * llSlotBytes.
  char* llSlots = nullptr;
  size_t llSlotBytes = 0;

  GYRE_HOST_DEVICE bool hasLines() const { return metaStride == sizeof(SlotLine); }
  GYRE_HOST_DEVICE char* slot(uint64_t step) const { return slots + (step % kFifoSlots) * slotBytes; }
  GYRE_HOST_DEVICE char* llSlot(uint64_t step) const { return llSlots + (step % kFifoSlots) * llSlotBytes; }
  // Both depths are powers of two, so the entry is a mask: `step % entries`
  // with an entry count chosen at run time compiled to a 64-bit division on
  // every step of every connection, sender and receiver alike.
  GYRE_HOST_DEVICE SlotMeta& metaOf(uint64_t step) const {
    const uint64_t entries = hasLines() ? kLineSlots : kFifoSlots;
    return *reinterpret_cast<SlotMeta*>(reinterpret_cast<char*>(meta) + (step & (entries - 1)) * metaStride);
  }
  // Only where hasLines().
  GYRE_HOST_DEVICE SlotLine& lineOf(uint64_t step) const { return reinterpret_cast<SlotLine&>(metaOf(step)); }
  // Where a step of `bytes` keeps its payload.
  GYRE_HOST_DEVICE char* payload(uint64_t step, size_t bytes) const {
    if (hasLines() && bytes <= kLineInlineBytes) return lineOf(step).payload;
    if (hasLines() && bytes <= kLinePayloadBytes) return linePayloads + (step % kLinePayloadSlots) * kLinePayloadBytes;
    return slot(step);
  }
};

inline uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void storeRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

}  // namespace gyre
