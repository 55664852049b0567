// Device memory shared between processes by CUDA IPC, opened once per
// process. CUDA carves small cudaMalloc allocations out of larger blocks and
// IPC shares a whole block: once one allocation of a block is open here,
// opening another of the same block fails (cudaErrorAlreadyMapped), and that
// allocation is reached through the first mapping at the same offset. So
// peers' allocations are tracked by block, and a block is closed when the
// last communicator holding it lets go.
#pragma once

#include <cstdint>
#include <set>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

// What the owner of an allocation tells the processes that map it.
struct SharedAllocation {
  IpcHandle handle{};      // of the allocation
  uint64_t bufferId = 0;   // in the owner's process
  uint64_t base = 0;       // the allocation's address there
  uint64_t blockBase = 0;  // its block's address there
};

// The allocation holding `p` (this process's device memory) described for
// peers, its handle made once per allocation; false when `p` is not
// cudaMalloc'd memory or [p, p + bytes) leaves the allocation. *offset: p's
// distance from the allocation's base.
bool describeOwnAllocation(const void* p, size_t bytes, SharedAllocation* out, uint64_t* offset);

// The base of process `ownerPid`'s allocation as mapped here. The block
// stays mapped at least until releasePeerBlocks(held).
ncclResult_t mapPeerAllocation(int64_t ownerPid, const SharedAllocation& a, std::set<uint64_t>* held, void** base);

// Lets go of the blocks `held` names; the last holder of a block closes it.
void releasePeerBlocks(std::set<uint64_t>* held);

// The same, one hold at a time: each mapPeerBlock takes a hold on the block
// (*block names it), which releasePeerBlock lets go of.
ncclResult_t mapPeerBlock(int64_t ownerPid, const SharedAllocation& a, uint64_t* block, void** base);
void releasePeerBlock(uint64_t block);

}  // namespace gyre
