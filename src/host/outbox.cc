#include "src/host/outbox.h"

#include <algorithm>
#include <cstring>

#include "src/host/shareable_memory.h"

namespace gyre {

Outbox::~Outbox() {
  rewind();
  if (base_) freeShareable(base_);
}

void Outbox::rewind() {
  used_ = 0;
  stagedThisCall_ = 0;
  lastSrc_ = nullptr;
  lastCopy_ = nullptr;
  for (char* p : retired_) freeShareable(p);
  retired_.clear();
}

bool Outbox::grow(size_t need) {
  if (unavailable_) return false;
  const size_t want = std::min(kOutboxMaxBytes, std::max({need, 2 * capacity_, kOutboxFirstBytes}));
  void* p = nullptr;
  if (allocShareable(want, &p) != ncclSuccess) {
    unavailable_ = true;
    return false;
  }
  if (base_) {
    if (used_) retired_.push_back(base_);
    else freeShareable(base_);
  }
  base_ = static_cast<char*>(p);
  capacity_ = want;
  used_ = 0;
  return true;
}

const void* Outbox::stage(const void* src, size_t bytes) {
  if (src == lastSrc_ && bytes == lastBytes_) return lastCopy_;
  const size_t rounded = (bytes + 63) & ~size_t{63};
  if (stagedThisCall_ + rounded > kOutboxMaxBytes) return nullptr;
  if (used_ + rounded > capacity_ && !grow(rounded)) return nullptr;
  stagedThisCall_ += rounded;
  char* at = base_ + used_;
  memcpy(at, src, bytes);
  used_ += rounded;
  lastSrc_ = src;
  lastBytes_ = bytes;
  lastCopy_ = at;
  return at;
}

}  // namespace gyre
