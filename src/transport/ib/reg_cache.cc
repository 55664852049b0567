#include "src/transport/ib/reg_cache.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "src/debug/error.h"
#include "src/debug/fork_guard.h"
#include "src/debug/log.h"
#include "src/transport/ib/ib_comm.h"
#include "src/transport/ib/unmap_watch.h"
#include "src/transport/ib/verbs_api.h"

namespace gyre::ib {
namespace {

constexpr uintptr_t kPage = 4096;
constexpr int kWatchPollMs = 1000;  // the watcher also wakes for its stop descriptor

struct Region {
  ibv_pd* pd;
  uintptr_t start, end;
  IbMr* mr;
  int refs;
  bool stale;    // over memory that changed: kept only until its users deregister
  bool watched;  // its range is on the userfaultfd; only watched regions are shared
  bool unwatch;  // gone(): just made stale, its range still to unwatch
};

// The userfaultfd watcher: runs while the cache holds a region.
struct Watch {
  int fd = -1;
  int stopFd = -1;
  std::thread* thread = nullptr;  // never destroyed at exit (a joinable std::thread would terminate)
  bool unavailable = false;       // userfaultfd refused: regions are not shared
};

std::mutex gMu;
std::vector<Region> gRegions;
Watch gWatch;

bool live(const Region& r) { return !r.stale && r.watched; }

// Unwatches the parts of [start, end) no live region still needs. [gMu]
// Allocates nothing: it runs on the watcher thread while the thread that
// unmapped waits, and that thread may hold a malloc arena's lock (a heap trim).
void unwatchUncovered(uintptr_t start, uintptr_t end) {
  if (gWatch.fd < 0) return;
  uintptr_t at = start;
  while (at < end) {
    uintptr_t coveredTo = at, nextStart = end;
    for (const Region& r : gRegions) {
      if (!live(r)) continue;
      if (r.start <= at && at < r.end) coveredTo = std::max(coveredTo, r.end);
      else if (r.start > at) nextStart = std::min(nextStart, r.start);
    }
    if (coveredTo > at) {
      at = coveredTo;
    } else {
      unwatchRange(gWatch.fd, at, nextStart);
      at = nextStart;
    }
  }
}

// [start, end) no longer holds what was registered there. [gMu]
void gone(uintptr_t start, uintptr_t end) {
  for (Region& r : gRegions)
    if (!r.stale && r.start < end && start < r.end) {
      r.stale = true;
      r.unwatch = r.watched;
    }
  for (Region& r : gRegions)
    if (r.unwatch) {
      r.unwatch = false;
      unwatchUncovered(r.start, r.end);
    }
  unwatchUncovered(start, end);  // a faulting page outside every region is let go too
}

// Applies the events the kernel reported so far. [gMu]
void drain() {
  if (gWatch.fd < 0) return;
  if (!readUnmapEvents(gWatch.fd, gone)) {
    GYRE_WARN("NET/IB: the registration cache's userfaultfd failed (%s); cached regions are dropped",
              strerror(errno));
    for (Region& r : gRegions) r.stale = true;
  }
}

void watcherLoop(int fd, int stopFd) {
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stopFd, POLLIN, 0}};
    const int n = poll(p, 2, kWatchPollMs);
    if (n < 0 && errno != EINTR) return;
    if (p[1].revents) return;
    if (n > 0 && p[0].revents) {
      std::lock_guard<std::mutex> lock(gMu);
      if (gWatch.fd == fd) drain();
      else readUnmapEvents(fd, [](uintptr_t, uintptr_t) {});  // a retired descriptor: nothing of it is cached
    }
  }
}

// Starts the watcher if none runs; false if userfaultfd is unavailable. [gMu]
bool ensureWatch() {
  if (gWatch.fd >= 0) return true;
  if (gWatch.unavailable) return false;
  std::string why;
  const int fd = openUnmapWatch(&why);
  const int stopFd = fd >= 0 ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK) : -1;
  if (fd < 0 || stopFd < 0) {
    if (fd >= 0) close(fd);
    gWatch.unavailable = true;
    GYRE_INFO("NET", "NET/IB: registration cache off (each regMr registers its own region): %s",
              why.empty() ? strerror(errno) : why.c_str());
    return false;
  }
  gWatch.fd = fd;
  gWatch.stopFd = stopFd;
  gWatch.thread = new std::thread([hazard = ForkHazard(), fd, stopFd] { watcherLoop(fd, stopFd); });
  return true;
}

// Stops the watcher once no region is left. Called with `lock` held; releases it if so.
void stopWatchIfIdle(std::unique_lock<std::mutex>& lock) {
  if (!gRegions.empty() || !gWatch.thread) return;
  Watch w = gWatch;
  gWatch = Watch{};
  lock.unlock();
  const uint64_t one = 1;
  (void)!write(w.stopFd, &one, sizeof(one));
  w.thread->join();
  delete w.thread;
  close(w.stopFd);
  close(w.fd);  // unregisters whatever is left
}

}  // namespace

ncclResult_t cachedRegister(ibv_pd* pd, void* data, size_t size, const char* what, IbMr** out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  const uintptr_t start = a & ~(kPage - 1);
  const uintptr_t end = (a + (size ? size : 1) + kPage - 1) & ~(kPage - 1);
  std::unique_lock<std::mutex> lock(gMu);
  drain();
  for (Region& r : gRegions)
    if (r.pd == pd && live(r) && r.start <= start && end <= r.end) {
      ++r.refs;
      *out = r.mr;
      return ncclSuccess;
    }
  // Populated, registered, then watched: ibv_reg_mr pins from inside the
  // kernel, which must not fault into a watched range (the watcher needs
  // this lock). The caller owns the buffer: it is not unmapped meanwhile.
  const bool watch = ensureWatch();
  if (watch) populateRange(start, end);
  const VerbsApi* v = verbs(nullptr);
  ibv_mr* mr = v->regMr(pd, reinterpret_cast<void*>(start), end - start,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr) {
    const int err = errno;
    stopWatchIfIdle(lock);  // started for this region: no thread outlives the cache's last region
    return fail(ncclSystemError, "NET/IB: ibv_reg_mr of %zu bytes on %s failed: %s", static_cast<size_t>(end - start),
                what, strerror(err));
  }
  const bool watched = watch && watchRange(gWatch.fd, start, end);
  auto* m = new IbMr{mr};
  gRegions.push_back(Region{pd, start, end, m, 1, false, watched, false});
  *out = m;
  return ncclSuccess;
}

ncclResult_t cachedDeregister(IbMr* m) {
  std::unique_lock<std::mutex> lock(gMu);
  drain();
  for (size_t i = 0; i < gRegions.size(); ++i) {
    if (gRegions[i].mr != m) continue;
    if (--gRegions[i].refs > 0) return ncclSuccess;
    const Region r = gRegions[i];
    gRegions.erase(gRegions.begin() + static_cast<long>(i));
    if (live(r)) unwatchUncovered(r.start, r.end);
    const int rc = verbs(nullptr)->deregMr(m->mr);
    delete m;
    stopWatchIfIdle(lock);
    if (rc != 0) return fail(ncclSystemError, "NET/IB: ibv_dereg_mr failed: %s", strerror(rc));
    return ncclSuccess;
  }
  return fail(ncclInternalError, "NET/IB: deregMr of a handle that is not registered");
}

void invalidateRegistrations(const void* data, size_t size) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(gMu);
  drain();
  gone(a & ~(kPage - 1), (a + size + kPage - 1) & ~(kPage - 1));
}

size_t cachedRegionCount() {
  std::lock_guard<std::mutex> lock(gMu);
  return gRegions.size();
}

size_t liveCachedRegionCount() {
  std::lock_guard<std::mutex> lock(gMu);
  drain();
  return static_cast<size_t>(std::count_if(gRegions.begin(), gRegions.end(), live));
}

bool registrationCacheWatching() {
  std::lock_guard<std::mutex> lock(gMu);
  return gWatch.thread != nullptr;
}

}  // namespace gyre::ib
