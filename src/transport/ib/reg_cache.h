// Registration cache for the IB network: one memory region per protection
// domain and page range, shared by every regMr() of a buffer inside it and
// counted, so a buffer registered for several connections (or registered
// again each call) costs one ibv_reg_mr. The region is deregistered when its
// last user deregisters.
//
// A region goes stale, and is never returned again, once its memory is
// unmapped, discarded or moved (free() of an mmapped block, munmap, mremap,
// madvise DONTNEED; unmap_watch.h), so a new buffer at a reused address is
// registered afresh instead of reaching pages that are no longer its own.
// Where userfaultfd is unavailable regions are not shared at all (each
// regMr() registers its own), which is always correct.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "include/gyre.h"

namespace gyre::ib {

struct IbMr;

// *out holds the region covering [data, data + size); `what` names the device for errors.
ncclResult_t cachedRegister(ibv_pd* pd, void* data, size_t size, const char* what, IbMr** out);
ncclResult_t cachedDeregister(IbMr* mr);
// Memory [data, data + size) was freed: no later lookup may return a region
// over it (explicit; the unmap watch does this for unmapped memory).
void invalidateRegistrations(const void* data, size_t size);
// Regions alive now, and those of them a lookup may still return (tests).
size_t cachedRegionCount();
size_t liveCachedRegionCount();
// Whether the unmap watcher runs (userfaultfd available and a region cached).
bool registrationCacheWatching();

}  // namespace gyre::ib
