#include "src/device/spin_watch.h"

#include "src/debug/error.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

// The abort word, then the timeout's report.
struct WatchWords {
  uint32_t abort;
  FlagTimeout timedOut;
};

}  // namespace

ncclResult_t SpinWatch::allocate() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (host_) return ncclSuccess;
  void *host = nullptr, *device = nullptr;
  GYRE_CHECK(deviceRuntime()->allocMapped(sizeof(WatchWords), &host, &device));  // zeroed
  host_ = host;
  auto* h = static_cast<WatchWords*>(host);
  auto* d = static_cast<WatchWords*>(device);
  abortHost_ = &h->abort;
  timedOutHost_ = &h->timedOut;
  abortDevice_ = &d->abort;
  timedOutDevice_ = &d->timedOut;
  return ncclSuccess;
}

void SpinWatch::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  freeAfterDeviceWork(DeferredFree::kMapped, host_);
  host_ = nullptr;
  abortHost_ = nullptr;
  timedOutHost_ = nullptr;
  abortDevice_ = nullptr;
  timedOutDevice_ = nullptr;
}

void SpinWatch::arm(FlagOps* ops, double timeoutSeconds) const {
  ops->abort = abortDevice_;
  ops->timedOut = timedOutDevice_;
  ops->timeoutNs = timeoutSeconds > 0 ? static_cast<uint64_t>(timeoutSeconds * 1e9) : 0;
}

void SpinWatch::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (abortHost_) __atomic_store_n(abortHost_, 1u, __ATOMIC_RELEASE);
}

bool SpinWatch::takeTimeout(int* peer, uint32_t* step) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (reported_ || !timedOutHost_) return false;
  const uint32_t peerPlusOne = __atomic_load_n(&timedOutHost_->peerPlusOne, __ATOMIC_ACQUIRE);
  if (peerPlusOne == 0) return false;
  reported_ = true;
  *peer = static_cast<int>(peerPlusOne) - 1;
  *step = timedOutHost_->step;
  return true;
}

}  // namespace gyre
