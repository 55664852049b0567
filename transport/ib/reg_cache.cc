#include "transport/ib/reg_cache.h"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "src/debug/error.h"
#include "transport/ib/ib_comm.h"
#include "transport/ib/verbs_api.h"

namespace gyre::ib {
namespace {

constexpr uintptr_t kPage = 4096;

struct Region {
  ibv_pd* pd;
  uintptr_t start, end;
  IbMr* mr;
  int refs;
  bool stale;  // over freed memory: kept only until its users deregister
};

std::mutex gMu;
std::vector<Region> gRegions;

}  // namespace

ncclResult_t cachedRegister(ibv_pd* pd, void* data, size_t size, const char* what, IbMr** out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  const uintptr_t start = a & ~(kPage - 1);
  const uintptr_t end = (a + (size ? size : 1) + kPage - 1) & ~(kPage - 1);
  std::lock_guard<std::mutex> lock(gMu);
  for (Region& r : gRegions)
    if (r.pd == pd && !r.stale && r.start <= start && end <= r.end) {
      ++r.refs;
      *out = r.mr;
      return ncclSuccess;
    }
  const VerbsApi* v = verbs(nullptr);
  ibv_mr* mr = v->regMr(pd, reinterpret_cast<void*>(start), end - start,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr)
    return fail(ncclSystemError, "NET/IB: ibv_reg_mr of %zu bytes on %s failed: %s", static_cast<size_t>(end - start),
                what, strerror(errno));
  auto* m = new IbMr{mr};
  gRegions.push_back(Region{pd, start, end, m, 1, false});
  *out = m;
  return ncclSuccess;
}

ncclResult_t cachedDeregister(IbMr* m) {
  std::lock_guard<std::mutex> lock(gMu);
  for (size_t i = 0; i < gRegions.size(); ++i) {
    if (gRegions[i].mr != m) continue;
    if (--gRegions[i].refs > 0) return ncclSuccess;
    gRegions.erase(gRegions.begin() + static_cast<long>(i));
    const int rc = verbs(nullptr)->deregMr(m->mr);
    delete m;
    if (rc != 0) return fail(ncclSystemError, "NET/IB: ibv_dereg_mr failed: %s", strerror(rc));
    return ncclSuccess;
  }
  return fail(ncclInternalError, "NET/IB: deregMr of a handle that is not registered");
}

void invalidateRegistrations(const void* data, size_t size) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(gMu);
  for (Region& r : gRegions)
    if (r.start < a + size && a < r.end) r.stale = true;
}

size_t cachedRegionCount() {
  std::lock_guard<std::mutex> lock(gMu);
  return gRegions.size();
}

}  // namespace gyre::ib
