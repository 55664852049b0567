// The point-to-point kernel: one launch per rank and batch copies the data
// of that rank's send/recv pairs with ranks of its own process, ordered by
// flags in device memory instead of by events, so graphs captured per rank
// can replay (src/device/copy/captured_copies.h). One kernel holds every
// pair of the batch: a waiting kernel occupies SM slots, not its stream's
// hardware queue, and nothing of the batch queues behind it.
//
// Each pair owns a slot of flags in the first side's memory. The side that
// arrived first at the pairing ("first") writes ready = 1 when its kernel
// starts and, before its kernel ends, waits for done and clears it. The other
// side ("second") knows both buffers: every block waits for ready and copies
// its part; the block that finishes last clears ready and its arrival count,
// then writes done. The arrival count is the second side's own, in its own
// GPU's memory: the two ranks may drive different GPUs, and atomics on a
// peer GPU's memory are not native over PCIe. Cleared flags let the next
// launch of the same graphs meet afresh.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre {

struct PairFlags {
  uint32_t ready;
  uint32_t done;
  uint32_t arrived;  // where this slot is the second side's: its blocks that finished their part
};

enum class PairRole : uint8_t { kFirst = 0, kSecond = 1 };

struct PairCopy {
  PairFlags* flags = nullptr;
  PairRole role = PairRole::kFirst;
  int32_t peer = 0;           // the other rank of the pair, for a timeout's report
  const void* src = nullptr;  // kSecond: the sender's buffer
  void* dst = nullptr;        // kSecond: the receiver's buffer
  uint64_t bytes = 0;
  uint32_t* arrived = nullptr;  // kSecond: its arrival count, in this rank's own memory
};

constexpr int kMaxPairCopies = 32;

struct PairCopyWork {
  PairCopy pairs[kMaxPairCopies];
  int32_t n = 0;
  // Device memory set on abort: waits give up.
  const volatile uint32_t* abort = nullptr;
  // A wait longer than this (GYRE_TIMEOUT) gives up and stores the peer's
  // rank + 1 in `timedOut` (mapped host memory, which the host polls), and
  // every later wait of the communicator gives up at once: with streams
  // sharing a hardware queue the peer's kernel may never start behind this
  // one (hardware_queues.h of the tests' fake says how).
  uint64_t timeoutNs = 0;
  volatile uint32_t* timedOut = nullptr;
};

}  // namespace gyre
