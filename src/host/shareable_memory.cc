#include "src/host/shareable_memory.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <shared_mutex>

#include "src/debug/error.h"

namespace gyre {
namespace {

// Keyed by base address; a lookup finds the last allocation starting at or
// below a pointer. Reads (every single-copy step) share the lock.
struct Registry {
  std::shared_mutex mutex;
  std::map<uint64_t, ShareableRange> byBase;
  std::atomic<size_t> count{0};
  // A forked child's copies of the parent's allocations (base -> bytes):
  // private mappings now, so never announced to a peer, but still freed by
  // freeShareable.
  std::map<uint64_t, uint64_t> inherited;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: frees may come from atexit handlers
  return *r;
}

constexpr size_t kPage = 4096;

// fork() would leave the child's tensors and buffers in the parent's shared
// memory: a child that writes what it inherited would write into the
// parent's. So the child maps each allocation again, privately and at the
// same address: it reads what the memory held, and its writes stay its own
// (as with any memory after a fork, except that a page the child has not
// written yet still shows the parent's later writes, as a private file
// mapping does). The registry's lock is held across the fork so the child
// finds it consistent.
void lockForFork() { registry().mutex.lock(); }
void unlockInParent() { registry().mutex.unlock(); }
void privatizeInChild() {
  Registry& reg = registry();
  for (const auto& [base, range] : reg.byBase) {
    // MAP_FIXED over the shared mapping; on failure the child keeps the
    // shared view, which is the parent's memory: better than a hole.
    if (mmap(reinterpret_cast<void*>(base), range.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, range.fd,
             0) != MAP_FAILED) {
      close(range.fd);
      reg.inherited[base] = range.bytes;
    }
  }
  for (const auto& [base, bytes] : reg.inherited) reg.byBase.erase(base);
  reg.count.store(reg.byBase.size() + reg.inherited.size(), std::memory_order_release);
  // A fresh lock rather than an unlock: glibc's rwlock knows its writer by
  // thread id, and the child's thread has another, so its unlock would be
  // taken for a reader's and leave the lock held.
  new (&reg.mutex) std::shared_mutex;
}

void watchForks() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(lockForFork, unlockInParent, privatizeInChild); });
}

}  // namespace

ncclResult_t allocShareable(size_t bytes, void** out) {
  *out = nullptr;
  watchForks();
  size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  if (rounded == 0) rounded = kPage;
  // MFD_CLOEXEC: a child the application execs must not keep the memory alive.
  int fd = memfd_create("gyre-host-mem", MFD_CLOEXEC);
  if (fd < 0) return fail(ncclSystemError, "gyre host allocation of %zu bytes: memfd_create failed: %s", bytes,
                          strerror(errno));
  struct stat st {};
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0 || fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return fail(ncclSystemError, "gyre host allocation of %zu bytes: sizing the memfd failed: %s", bytes,
                strerror(err));
  }
  void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return fail(ncclSystemError, "gyre host allocation of %zu bytes: mmap failed: %s", bytes, strerror(err));
  }
  Registry& reg = registry();
  {
    std::unique_lock<std::shared_mutex> lock(reg.mutex);
    reg.byBase[reinterpret_cast<uint64_t>(p)] =
        ShareableRange{reinterpret_cast<uint64_t>(p), rounded, static_cast<uint64_t>(st.st_ino), fd};
    reg.count.fetch_add(1, std::memory_order_release);
  }
  *out = p;
  return ncclSuccess;
}

bool freeShareable(void* p) {
  Registry& reg = registry();
  if (reg.count.load(std::memory_order_acquire) == 0) return false;
  ShareableRange range;
  {
    std::unique_lock<std::shared_mutex> lock(reg.mutex);
    auto it = reg.byBase.find(reinterpret_cast<uint64_t>(p));
    if (it == reg.byBase.end()) {
      auto copy = reg.inherited.find(reinterpret_cast<uint64_t>(p));
      if (copy == reg.inherited.end()) return false;
      munmap(p, copy->second);
      reg.inherited.erase(copy);
      reg.count.fetch_sub(1, std::memory_order_release);
      return true;
    }
    range = it->second;
    reg.byBase.erase(it);
    reg.count.fetch_sub(1, std::memory_order_release);
  }
  // A peer that mapped the file keeps its pages until it unmaps them
  // (src/host/peer_mappings.cc); closing our descriptor frees nothing of theirs.
  munmap(p, range.bytes);
  close(range.fd);
  return true;
}

bool findShareable(const void* p, size_t bytes, ShareableRange* out) {
  Registry& reg = registry();
  if (reg.count.load(std::memory_order_acquire) == 0) return false;
  uint64_t at = reinterpret_cast<uint64_t>(p);
  std::shared_lock<std::shared_mutex> lock(reg.mutex);
  auto it = reg.byBase.upper_bound(at);
  if (it == reg.byBase.begin()) return false;
  const ShareableRange& r = std::prev(it)->second;
  if (at + bytes > r.base + r.bytes) return false;
  *out = r;
  return true;
}

}  // namespace gyre
