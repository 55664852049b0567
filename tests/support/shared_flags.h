// Flags the ranks of one forked run share (an anonymous shared mapping made
// before the fork), so a rank can keep its side of a broken exchange open
// until the others have seen the failure: a rank that tears down first would
// otherwise be a second failure its peers might report instead of the first.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "fork_ranks.h"

namespace gyre::test {

class SharedFlags {
 public:
  SharedFlags() {
    void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shared_ = p == MAP_FAILED ? nullptr : new (p) Shared();
  }
  ~SharedFlags() {
    if (shared_) munmap(shared_, sizeof(Shared));
  }
  SharedFlags(const SharedFlags&) = delete;
  SharedFlags& operator=(const SharedFlags&) = delete;

  bool ok() const { return shared_ != nullptr; }
  void markDone(int rank) { shared_->done[rank].store(1); }
  // Waits up to `seconds` for `rank` to mark itself done.
  bool waitDone(int rank, double seconds) {
    const double until = monotonicSeconds() + seconds;
    while (shared_->done[rank].load() == 0) {
      if (monotonicSeconds() > until) return false;
      usleep(2000);
    }
    return true;
  }

 private:
  struct Shared {
    std::atomic<int> done[8];
  };
  Shared* shared_ = nullptr;
};

}  // namespace gyre::test
