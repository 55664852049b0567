#include "src/host/peer_mappings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/debug/log.h"
#include "src/host/shareable_memory.h"

namespace gyre {
namespace {

// Mappings kept per communicator. An application that frees and allocates
// buffers call after call would otherwise pile up peers' dead allocations,
// whose pages a mapping keeps alive; the least recently used goes first.
constexpr size_t kMaxMappings = 64;
constexpr uint64_t kPopulateMaxBytes = 16 << 20;

}  // namespace

PeerAddress describeLocal(const void* p, size_t bytes) {
  PeerAddress a;
  a.address = reinterpret_cast<uint64_t>(p);
  ShareableRange range;
  if (bytes > 0 && findShareable(p, bytes, &range)) {
    a.inode = range.inode;
    a.base = range.base;
    a.fd = range.fd;
    a.pages = static_cast<uint32_t>(range.bytes / 4096);
  }
  return a;
}

PeerMappings::~PeerMappings() {
  for (const Mapping& m : maps_) munmap(m.local, m.bytes);
}

size_t PeerMappings::liveMappings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return maps_.size();
}

char* PeerMappings::locate(int peer, int pid, const PeerAddress& a, size_t bytes) {
  if (a.fd < 0 || a.inode == 0) return nullptr;
  const uint64_t length = static_cast<uint64_t>(a.pages) * 4096;
  // Every value here is the peer's word: compared without a sum that could
  // wrap (an offset near 2^64 plus the size would pass as small and point
  // before the mapping).
  if (a.address < a.base || a.address - a.base > length || bytes > length - (a.address - a.base))
    return nullptr;  // not inside: take the slow path
  std::lock_guard<std::mutex> lock(mutex_);
  char* local = nullptr;
  for (Mapping& m : maps_)
    if (m.peer == peer && m.inode == a.inode && m.bytes == length) {
      m.lastUse = ++clock_;
      local = m.local;
      break;
    }
  if (!local) local = open(peer, pid, a);
  if (!local) return nullptr;
  ++mappedCopies_;
  return local + (a.address - a.base);
}

char* PeerMappings::open(int peer, int pid, const PeerAddress& a) {
  if (std::find(refusedPeers_.begin(), refusedPeers_.end(), peer) != refusedPeers_.end()) return nullptr;
  const uint64_t length = static_cast<uint64_t>(a.pages) * 4096;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, a.fd);
  int fd = ::open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    GYRE_INFO("P2P", "single copy from rank %d through process_vm_readv: opening %s failed: %s", peer, path,
              strerror(errno));
    refusedPeers_.push_back(peer);
    return nullptr;
  }
  struct stat st {};
  // The descriptor may have been closed and reused since the announcement
  // was written only if the peer freed the buffer during the call; map
  // nothing but the announced file.
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != a.inode ||
      static_cast<uint64_t>(st.st_size) < length) {
    close(fd);
    return nullptr;
  }
  // Small allocations (outboxes, outbox.h) come with their page tables
  // filled: a first touch costs far more than the copy on a VM, and each
  // slot would pay it in its first timed call. Large user buffers are left
  // to fault in as they are read.
  const int populate = length <= kPopulateMaxBytes ? MAP_POPULATE : 0;
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | populate, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  if (maps_.size() >= kMaxMappings) {
    auto oldest = std::min_element(maps_.begin(), maps_.end(),
                                   [](const Mapping& x, const Mapping& y) { return x.lastUse < y.lastUse; });
    munmap(oldest->local, oldest->bytes);
    maps_.erase(oldest);
  }
  maps_.push_back(Mapping{peer, a.inode, length, static_cast<char*>(p), ++clock_});
  return static_cast<char*>(p);
}

}  // namespace gyre
