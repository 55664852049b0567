// A communicator's mappings of its peers' shareable allocations
// (src/host/shareable_memory.h): a single-copy step whose peer announced a
// range inside such an allocation reads or writes it with memcpy through a
// shared mapping of the same memfd, opened once through /proc/<pid>/fd/<fd>
// and kept for later calls. Opening another process's descriptor needs the
// same permission as reading its /proc entries (same user; unlike
// process_vm_readv, yama's ptrace_scope does not forbid it); where the open
// fails the step falls back to process_vm_readv, and that peer is not tried
// again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gyre {

// What an owner puts in a single-copy step's inline line: the address of
// its elements and, when they lie in a shareable allocation, how to map it.
// 32 bytes, the inline payload of a shared-memory slot line.
struct PeerAddress {
  uint64_t address = 0;
  uint64_t inode = 0;      // of the allocation's memfd (0: not shareable)
  uint64_t base = 0;       // the allocation's first byte, in the owner's space
  int32_t fd = -1;         // the owner's descriptor of the memfd (-1: not shareable)
  uint32_t pages = 0;      // the allocation's length in 4 KiB pages
};
static_assert(sizeof(PeerAddress) == 32, "PeerAddress must fit a slot line's inline payload");
// PeerAddress::fd of an announcement whose elements were sent in the slot
// (kStepByValueIfPrivate).
constexpr int32_t kElementsInSlot = -2;

// Fills `a` for `bytes` at `p` in this process.
PeerAddress describeLocal(const void* p, size_t bytes);

class PeerMappings {
 public:
  PeerMappings() = default;
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;
  ~PeerMappings();  // unmaps everything

  // This process's view of `bytes` at the peer's a.address, or nullptr when
  // it cannot be mapped (not shareable, refused, stale): use process_vm_readv.
  char* locate(int peer, int pid, const PeerAddress& a, size_t bytes);
  // How many steps went through a mapping (tests check the path was taken).
  uint64_t mappedCopies() const { return mappedCopies_; }
  size_t liveMappings() const;

 private:
  struct Mapping {
    int peer;
    uint64_t inode;
    uint64_t bytes;
    char* local;
    uint64_t lastUse;
  };
  char* open(int peer, int pid, const PeerAddress& a);

  mutable std::mutex mutex_;
  std::vector<Mapping> maps_;
  std::vector<int> refusedPeers_;
  uint64_t clock_ = 0;
  uint64_t mappedCopies_ = 0;
};

}  // namespace gyre
