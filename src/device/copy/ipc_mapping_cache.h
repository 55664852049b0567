// The senders' buffers a receiving rank has mapped by CUDA IPC
// (ipc_copies.h), kept as NCCL's registration cache keeps them. Opening a
// handle costs milliseconds and a mapping pins the sender's memory, so:
//   - an entry is an allocation's block (what CUDA IPC maps) as the
//     process-wide registry names it (ipc_registry.h), found by the owner's
//     pid and the allocation's buffer id, which CUDA never reuses within a
//     process: repeated sends of one buffer open it once, and a buffer freed
//     and allocated again at the same address is a new entry, never served
//     the old mapping;
//   - at most GYRE_IPC_CACHE_ENTRIES entries stay open; past that the least
//     recently used is closed, once the copies queued from it have run (an
//     event recorded after its latest copy says so). An entry whose copies
//     are all still queued stays, above the bound, until they have run;
//   - an entry a CUDA graph captured a copy from stays until destroy, since
//     every replay of the graph reads it again.
// A freed sender block is so unpinned once the receiver's cache moves past
// it, instead of for the communicator's whole life.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "include/gyre.h"
#include "src/device/runtime/ipc_registry.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

class IpcMappingCache {
 public:
  IpcMappingCache() = default;
  ~IpcMappingCache() { releaseAll(); }
  IpcMappingCache(const IpcMappingCache&) = delete;
  IpcMappingCache& operator=(const IpcMappingCache&) = delete;

  // Reads GYRE_IPC_CACHE_ENTRIES.
  ncclResult_t setup();
  // `a` (an allocation of process `ownerPid`) as mapped here: *base its
  // base, *entry what `used` takes.
  ncclResult_t map(int64_t ownerPid, const SharedAllocation& a, void** base, uint64_t* entry);
  // After queuing a copy from `entry` on `stream` (the communicator's
  // device current): captured, the entry stays until destroy; else an event
  // after the copy tells when it may close.
  ncclResult_t used(uint64_t entry, StreamHandle stream, bool captured);
  // Destroy: closes every entry (the teardown has waited for the copies, or
  // released them).
  void releaseAll();
  size_t size();

 private:
  struct Entry {
    uint64_t lastUse = 0;
    EventHandle lastCopy = nullptr;  // recorded after its latest copy
    bool captured = false;
  };
  void evictOverBound();  // mutex_ held
  std::mutex mutex_;
  std::map<uint64_t, Entry> entries_;  // by the registry's block serial
  uint64_t clock_ = 0;
  size_t bound_ = 64;
};

}  // namespace gyre
