// Host memory that other processes of this host can map: what ncclMemAlloc
// (on a process without a CUDA device) and gyreMemAllocHost hand out. Each
// allocation is its own memfd, mapped shared here; a peer in a single-copy
// step maps the same file through /proc/<pid>/fd/<fd> (src/host/peer_mappings.h)
// and copies with memcpy, which runs at memory speed, where process_vm_readv
// pins and copies page by page (4-5 GB/s against memcpy's 8-30 on the
// project's VM). Buffers from malloc cannot be mapped by a peer; they keep
// the process_vm_readv path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "include/gyre.h"

namespace gyre {

// Where a shareable allocation lives, as a peer needs it to map it.
struct ShareableRange {
  uint64_t base = 0;   // the allocation's first byte in the owner's address space
  uint64_t bytes = 0;  // the mapped length (whole pages)
  uint64_t inode = 0;  // the memfd's inode: which file /proc/<pid>/fd/<fd> must be
  int32_t fd = -1;     // the owner's descriptor of the memfd
};

// A zeroed shareable allocation of at least `bytes` (page-aligned).
ncclResult_t allocShareable(size_t bytes, void** out);
// Releases an allocation made by allocShareable; false if `p` is not the
// start of one (the caller then tries its other allocators). Safe in a
// forked child: there each inherited allocation is a private copy, mapped
// at the same address and never announced to a peer.
bool freeShareable(void* p);
// Whether [p, p + bytes) lies inside one shareable allocation, and which.
// Cheap when the process has none (one atomic load).
bool findShareable(const void* p, size_t bytes, ShareableRange* out);

}  // namespace gyre
