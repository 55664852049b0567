#include "src/device/direct/direct_clique.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace gyre {

namespace {
// How often a collecting rank looks at the abort flag while it waits.
constexpr auto kAbortCheckEvery = std::chrono::milliseconds(50);
}  // namespace

DirectClique::DirectClique(int nranks, size_t recordBytes)
    : readyEvents(nranks, nullptr), doneEvents(nranks, nullptr), capturedInboxes(nranks, nullptr),
      nranks_(nranks), recordBytes_(recordBytes), holders_(nranks) {}

DirectClique::Call& DirectClique::callOf(uint64_t seq) {
  Call& c = calls_[seq];
  if (c.posted.empty()) {
    c.records.assign(nranks_ * recordBytes_, 0);
    c.posted.assign(nranks_, false);
  }
  return c;
}

void DirectClique::post(int rank, uint64_t seq, const void* record) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Call& c = callOf(seq);
    memcpy(c.records.data() + rank * recordBytes_, record, recordBytes_);
    if (!c.posted[rank]) ++c.nposted;
    c.posted[rank] = true;
  }
  changed_.notify_all();
}

bool DirectClique::collect(uint64_t seq, const Deadline& deadline, const std::atomic<bool>* abort, void* out,
                           int* missing) {
  std::unique_lock<std::mutex> lock(mutex_);
  Call* c = &callOf(seq);
  while (c->nposted < nranks_) {
    if (deadline.expired() || (abort && abort->load())) {
      *missing = static_cast<int>(std::find(c->posted.begin(), c->posted.end(), false) - c->posted.begin());
      return false;
    }
    auto slice = std::min<std::chrono::milliseconds>(kAbortCheckEvery,
                                                     std::chrono::milliseconds(deadline.remainingMs() + 1));
    changed_.wait_for(lock, slice);  // `c` stays valid: only the last collector erases it
  }
  memcpy(out, c->records.data(), c->records.size());
  if (++c->ncollected == nranks_) calls_.erase(seq);
  return true;
}

bool DirectClique::release(void (*destroyEvent)(void*), void (*freeDevice)(void*)) {
  if (holders_.fetch_sub(1) != 1) return false;
  for (const std::vector<void*>* events : {&readyEvents, &doneEvents})
    for (void* e : *events)
      if (e) destroyEvent(e);
  for (uint32_t* inbox : capturedInboxes)
    if (inbox) freeDevice(inbox);
  delete this;
  return true;
}

}  // namespace gyre
