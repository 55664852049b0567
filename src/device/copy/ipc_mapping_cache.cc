#include "src/device/copy/ipc_mapping_cache.h"

#include <algorithm>
#include <vector>

#include "src/config/env.h"
#include "src/debug/error.h"

namespace gyre {

ncclResult_t IpcMappingCache::setup() {
  int64_t entries = 0;
  GYRE_CHECK(env::getInt("GYRE_IPC_CACHE_ENTRIES", &entries));
  std::lock_guard<std::mutex> lock(mutex_);
  bound_ = static_cast<size_t>(entries);
  return ncclSuccess;
}

ncclResult_t IpcMappingCache::map(int64_t ownerPid, const SharedAllocation& a, void** base, uint64_t* entry) {
  uint64_t block = 0;
  GYRE_CHECK(mapPeerBlock(ownerPid, a, &block, base));  // a hold, opened only when the registry has none
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, added] = entries_.try_emplace(block);
  if (!added) releasePeerBlock(block);  // the entry holds it already
  it->second.lastUse = ++clock_;
  *entry = block;
  if (added) evictOverBound();
  return ncclSuccess;
}

ncclResult_t IpcMappingCache::used(uint64_t entry, StreamHandle stream, bool captured) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(entry);
  if (it == entries_.end()) return ncclSuccess;
  Entry& e = it->second;
  if (captured) {
    e.captured = true;
    return ncclSuccess;
  }
  DeviceRuntime* rt = deviceRuntime();
  if (!e.lastCopy) GYRE_CHECK(rt->eventCreate(&e.lastCopy));
  return rt->eventRecord(e.lastCopy, stream);
}

void IpcMappingCache::evictOverBound() {
  if (entries_.size() <= bound_) return;
  DeviceRuntime* rt = deviceRuntime();
  RelaxedCapture relaxed;  // the queries below, while the application may capture
  // Least recently used first; the newest entry (being mapped now) never.
  std::vector<std::pair<uint64_t, uint64_t>> byAge;  // (lastUse, block)
  for (const auto& [block, e] : entries_)
    if (!e.captured && e.lastUse != clock_) byAge.emplace_back(e.lastUse, block);
  std::sort(byAge.begin(), byAge.end());
  for (const auto& [lastUse, block] : byAge) {
    if (entries_.size() <= bound_) break;
    Entry& e = entries_[block];
    bool done = true;
    if (e.lastCopy) {
      TentativeFailures look;  // a query that fails keeps the entry; it is no error of this call
      if (rt->eventQuery(e.lastCopy, &done) != ncclSuccess) done = false;
    }
    if (!done) continue;  // a queued copy still reads it
    if (e.lastCopy) rt->eventDestroy(e.lastCopy);
    releasePeerBlock(block);
    entries_.erase(block);
  }
}

void IpcMappingCache::releaseAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceRuntime* rt = deviceRuntime();
  for (auto& [block, e] : entries_) {
    if (e.lastCopy && rt) rt->eventDestroy(e.lastCopy);
    releasePeerBlock(block);
  }
  entries_.clear();
}

size_t IpcMappingCache::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace gyre
