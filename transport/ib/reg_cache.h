// Registration cache for the IB network: one memory region per protection
// domain and page range, shared by every regMr() of a buffer inside it and
// counted, so a buffer registered for several connections (or registered
// again each call) costs one ibv_reg_mr. The region is deregistered when its
// last user deregisters, and invalidate() (called when memory is freed)
// drops regions over freed pages so a new buffer at a reused address is
// registered afresh instead of hitting pages that are no longer its own.
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
// Memory [data, data + size) was freed: no later lookup may return a region over it.
void invalidateRegistrations(const void* data, size_t size);
// Regions alive now (tests).
size_t cachedRegionCount();

}  // namespace gyre::ib
