#include "host_allocator.h"

#include <gyre.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <c10/core/Allocator.h>

namespace torch_gyre {
namespace {

// The bound on live allocations when GYRE_TORCH_ALLOCATOR_MAX_ALLOCATIONS is
// unset: each holds a memfd descriptor, and the application's sockets and
// files must still fit under RLIMIT_NOFILE. A quarter of the soft limit.
uint64_t defaultMaxAllocations() {
  struct rlimit r {};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 4096;
  return std::max<uint64_t>(1, r.rlim_cur / 4);
}

// A gyre setting as an integer (parsed and range-checked by gyre's
// registry); `fallback` where it cannot be read.
int64_t setting(const char* name, int64_t fallback) {
  ncclParamHandle_t h = nullptr;
  int64_t v = fallback;
  if (ncclParamBind(&h, name) != ncclSuccess || ncclParamGetI64(h, &v) != ncclSuccess) return fallback;
  return v;
}

constexpr size_t kPage = 4096;

size_t pagesOf(size_t bytes) { return (bytes + kPage - 1) / kPage; }

// A freed allocation kept for the next one of the same size: a new memfd
// costs its syscalls, a page fault per 4 KiB page on first touch (shared
// memory gets no transparent huge pages) and, in every peer, an open and a
// mapping; the kept one is faulted in already and still mapped by the peers
// that read it (a gathered list's flat buffer, an optimizer's temporaries,
// every step).
struct Kept {
  void* p;
  size_t pages;
  pid_t owner;  // a forked child must not hand out what it inherited
};

struct Arena {
  std::mutex mutex;
  // gyre's allocations: start -> bytes asked and the process that made it
  std::unordered_map<const void*, std::pair<size_t, pid_t>> live;
  std::vector<Kept> kept;                        // oldest first
  HostAllocatorStats stats;
  c10::Allocator* replaced = nullptr;
};

Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: tensors may be freed by atexit handlers
  return *a;
}

// A fork while another thread holds the lock would leave it locked in the
// child, whose inherited tensors still have to be freed there.
void lockForFork() { arena().mutex.lock(); }
void unlockAfterFork() { arena().mutex.unlock(); }

// Takes the oldest kept allocation out of the cache (the lock held); the
// caller frees it after unlocking.
void* evictOldest(Arena& a) {
  Kept k = a.kept.front();
  a.kept.erase(a.kept.begin());
  a.stats.keptBytes -= k.pages * kPage;
  return k.p;
}

// The deleter of a tensor's memory from gyre: kept for reuse while the
// cache has room, otherwise freed (gyre's registry forgets it; its pages go
// once no peer maps them any more).
void freeFromGyre(void* p) {
  Arena& a = arena();
  std::vector<void*> release;
  {
    std::lock_guard<std::mutex> lock(a.mutex);
    auto it = a.live.find(p);
    if (it != a.live.end()) {
      const size_t pages = pagesOf(it->second.first);
      // What a forked child inherited is a private copy there: freed, never kept.
      const bool ours = it->second.second == getpid();
      a.stats.liveBytes -= it->second.first;
      --a.stats.liveAllocations;
      a.live.erase(it);
      if (ours && pages * kPage <= a.stats.keepBytes) {
        while (a.stats.keptBytes + pages * kPage > a.stats.keepBytes) release.push_back(evictOldest(a));
        a.kept.push_back(Kept{p, pages, getpid()});
        a.stats.keptBytes += pages * kPage;
        p = nullptr;
      }
    }
  }
  for (void* q : release) gyreMemFreeHost(q);
  if (p) gyreMemFreeHost(p);
}

// A kept allocation of exactly `n`'s pages, or nullptr (the lock held).
// Those a forked child inherited are private copies now: dropped.
void* reuseKept(Arena& a, size_t n, std::vector<void*>* release) {
  const size_t pages = pagesOf(n);
  const pid_t self = getpid();
  void* found = nullptr;
  for (size_t i = a.kept.size(); i-- > 0;) {
    Kept& k = a.kept[i];
    if (k.owner != self || (k.pages == pages && !found)) {
      if (k.owner != self) release->push_back(k.p);
      else found = k.p;
      a.stats.keptBytes -= k.pages * kPage;
      a.kept.erase(a.kept.begin() + static_cast<ptrdiff_t>(i));
    }
  }
  return found;
}

// torch's raw_deallocate (and anything else that frees through
// raw_deleter()) gets pointers of both origins.
void freeEither(void* p) {
  if (inHostArena(p)) return freeFromGyre(p);
  if (c10::DeleterFnPtr d = arena().replaced->raw_deleter()) d(p);
}

c10::DataPtr allocateTensorMemory(size_t n) {
  Arena& a = arena();
  if (n >= a.stats.minBytes) {
    bool room;
    void* p = nullptr;
    std::vector<void*> release;
    {
      std::lock_guard<std::mutex> lock(a.mutex);
      p = reuseKept(a, n, &release);
      // Kept allocations hold descriptors too: the oldest go to make room.
      while (!p && !a.kept.empty() && a.stats.liveAllocations + a.kept.size() >= a.stats.maxAllocations)
        release.push_back(evictOldest(a));
      room = p || a.stats.liveAllocations < a.stats.maxAllocations;
      if (room) ++a.stats.liveAllocations;  // held while the allocation is made
      if (p) {
        a.live.emplace(p, std::make_pair(n, getpid()));
        a.stats.liveBytes += n;
        ++a.stats.allocations;
        ++a.stats.reused;
      }
    }
    for (void* q : release) gyreMemFreeHost(q);
    if (p) return c10::DataPtr(p, p, &freeFromGyre, c10::Device(c10::DeviceType::CPU));
    // Refused in a forked child and wherever the memfd or the mapping cannot
    // be made (descriptors or address space exhausted): torch's own then.
    if (room && gyreMemAllocHost(&p, n) == ncclSuccess && p != nullptr) {
      std::lock_guard<std::mutex> lock(a.mutex);
      a.live.emplace(p, std::make_pair(n, getpid()));
      a.stats.liveBytes += n;
      ++a.stats.allocations;
      return c10::DataPtr(p, p, &freeFromGyre, c10::Device(c10::DeviceType::CPU));
    }
    std::lock_guard<std::mutex> lock(a.mutex);
    if (room) --a.stats.liveAllocations;
    ++a.stats.fallbacks;
  }
  return a.replaced->allocate(n);
}

// c10::Allocator's shape differs between torch versions: allocate() is const
// in 1.x and non-const in later 2.x, which also declare copy_data. Detected
// from the header, with partial specializations so that only the shape this
// torch has is compiled.
template <class A, class = void>
struct AllocateIsConst : std::false_type {};
template <class A>
struct AllocateIsConst<A, std::void_t<decltype(std::declval<const A&>().allocate(size_t{}))>> : std::true_type {};

template <class A, class = void>
struct HasCopyData : std::false_type {};
template <class A>
struct HasCopyData<A, std::void_t<decltype(&A::copy_data)>> : std::true_type {};

template <class A, bool = HasCopyData<A>::value>
struct WithCopyData : A {
  // The replaced allocator's raw deleter frees through freeEither; where it
  // has none, raw allocation is refused as before.
  c10::DeleterFnPtr raw_deleter() const override { return arena().replaced->raw_deleter() ? &freeEither : nullptr; }
};
template <class A>
struct WithCopyData<A, true> : WithCopyData<A, false> {
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
};

template <class A, bool = AllocateIsConst<A>::value>
struct SharedCpuAllocator : WithCopyData<A> {
  c10::DataPtr allocate(size_t n) const override { return allocateTensorMemory(n); }
};
template <class A>
struct SharedCpuAllocator<A, false> : WithCopyData<A> {
  c10::DataPtr allocate(size_t n) override { return allocateTensorMemory(n); }
};

}  // namespace

bool installHostAllocator() {
  static SharedCpuAllocator<c10::Allocator> allocator;
  static std::once_flag once;
  std::call_once(once, [] {
    if (setting("GYRE_TORCH_ALLOCATOR", 1) == 0) return;
    Arena& a = arena();
    a.stats.minBytes = static_cast<uint64_t>(setting("GYRE_TORCH_ALLOCATOR_MIN_BYTES", 1 << 20));
    const int64_t most = setting("GYRE_TORCH_ALLOCATOR_MAX_ALLOCATIONS", 0);
    a.stats.maxAllocations = most > 0 ? static_cast<uint64_t>(most) : defaultMaxAllocations();
    a.stats.keepBytes = static_cast<uint64_t>(setting("GYRE_TORCH_ALLOCATOR_KEEP_BYTES", int64_t{512} << 20));
    a.replaced = c10::GetAllocator(c10::DeviceType::CPU);
    pthread_atfork(lockForFork, unlockAfterFork, unlockAfterFork);
    // Priority 1 outranks torch's default CPU allocator (0); one that
    // someone installed with a higher priority stays.
    c10::SetAllocator(c10::DeviceType::CPU, &allocator, 1);
    a.stats.installed = c10::GetAllocator(c10::DeviceType::CPU) == &allocator;
  });
  return arena().stats.installed;
}

HostAllocatorStats hostAllocatorStats() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  HostAllocatorStats s = a.stats;
  s.keptAllocations = a.kept.size();
  return s;
}

bool inHostArena(const void* p) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  return a.live.count(p) != 0;
}

}  // namespace torch_gyre
