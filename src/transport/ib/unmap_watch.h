// Tells the registration cache when registered memory stops being the memory
// it registered: unmapped (munmap, and so free() of a block glibc had
// mmapped, brk shrinking, mmap MAP_FIXED over it), discarded (madvise
// DONTNEED/FREE/REMOVE) or moved (mremap, and so realloc). A memory region
// pins the pages it was registered over; once the virtual range points at
// other pages, the NIC would read and write the old ones.
//
// The kernel reports those events on a userfaultfd (UFFD_FEATURE_EVENT_UNMAP,
// _REMOVE, _REMAP) for the ranges registered with it, whichever code made the
// call: glibc's free() calls munmap internally, out of reach of symbol
// interposition, and is seen all the same. The thread that unmaps waits until
// the event is read, so the cache marks the region stale before that
// munmap() returns (reg_cache.cc reads the events under its lock).
//
// Missing-page mode is the only registration mode for these events, so a
// watched range is populated before it is watched, and a range that faults
// anyway (after a discard) is given up (unwatched, its region made stale):
// the fault then proceeds as it would without gyre.
#pragma once

#include <cstdint>
#include <string>

namespace gyre::ib {

// An open userfaultfd with the unmap events enabled, or -1 and *why.
int openUnmapWatch(std::string* why);

// Maps every page of [start, end) (page aligned), before it is registered
// and watched: a missing page in a watched range faults to the watcher, and
// the kernel's own access during ibv_reg_mr must not wait on it.
void populateRange(uintptr_t start, uintptr_t end);

// Registers [start, end) for the events; false when the kernel refuses
// (memory that is not anonymous or shmem, or another watcher's).
bool watchRange(int fd, uintptr_t start, uintptr_t end);
void unwatchRange(int fd, uintptr_t start, uintptr_t end);

// Reads every pending event without blocking and calls gone(start, end) for
// each range that no longer holds the memory registered there. Returns false
// when the descriptor failed (the caller then stops trusting it).
template <typename Gone>
bool readUnmapEvents(int fd, Gone&& gone);

namespace unmap_detail {
// One event: its kind and range; false when none is pending or on error (*failed).
bool nextEvent(int fd, uintptr_t* start, uintptr_t* end, bool* failed);
}  // namespace unmap_detail

template <typename Gone>
bool readUnmapEvents(int fd, Gone&& gone) {
  uintptr_t start = 0, end = 0;
  bool failed = false;
  while (unmap_detail::nextEvent(fd, &start, &end, &failed)) gone(start, end);
  return !failed;
}

}  // namespace gyre::ib
