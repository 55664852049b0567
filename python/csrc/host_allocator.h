// torch's CPU allocator, replaced by one whose large allocations are gyre's
// shareable host memory (gyreMemAllocHost), so that the other ranks of this
// host read and write those tensors in place: a host collective on them is
// one copy instead of two through a FIFO. Smaller tensors, and every
// allocation gyre cannot serve (a forked child, memfd or mmap refused, the
// bound on live allocations reached), come from the allocator it replaced,
// whose own deleter frees them.
//
// Freed allocations are kept, up to a bound, for the next of the same size:
// the peers' mappings of them stay valid and their pages faulted in.
//
// Settings (docs/ENVIRONMENT.md): GYRE_TORCH_ALLOCATOR (0: leave torch's
// allocator alone), GYRE_TORCH_ALLOCATOR_MIN_BYTES (the threshold),
// GYRE_TORCH_ALLOCATOR_MAX_ALLOCATIONS (each allocation, live or kept, holds
// a descriptor) and GYRE_TORCH_ALLOCATOR_KEEP_BYTES (the cache's bound).
#pragma once

#include <cstddef>
#include <cstdint>

namespace torch_gyre {

struct HostAllocatorStats {
  bool installed = false;       // torch's CPU allocator is this one
  uint64_t minBytes = 0;        // allocations from this size come from gyre
  uint64_t maxAllocations = 0;  // at most this many live at once
  uint64_t liveAllocations = 0;
  uint64_t liveBytes = 0;
  uint64_t allocations = 0;  // served from gyre since install
  uint64_t fallbacks = 0;    // at or above minBytes, but served by the replaced allocator
  uint64_t reused = 0;       // of `allocations`, served by a freed one of the same size
  uint64_t keepBytes = 0;    // freed allocations kept for reuse, at most this many bytes
  uint64_t keptBytes = 0;    // now kept
  uint64_t keptAllocations = 0;
};

// Installs the allocator unless GYRE_TORCH_ALLOCATOR=0 or another allocator
// of higher priority is in place; idempotent. Returns whether it is torch's
// CPU allocator now.
bool installHostAllocator();
HostAllocatorStats hostAllocatorStats();
// Whether `p` is the start of a live allocation this allocator took from gyre.
bool inHostArena(const void* p);

}  // namespace torch_gyre
