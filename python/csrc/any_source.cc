#include "any_source.h"

#include <algorithm>
#include <string>
#include <thread>

#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

namespace torch_gyre {

namespace {

// The store torch hands a backend is prefixed per group: these names are
// the group's own.
std::string sentKey(int src, int dst) {
  return "torch_gyre/sent/" + std::to_string(src) + "/" + std::to_string(dst);
}

// Polling the store: quick at first (a send is usually announced already or
// within microseconds), then backing off so a long wait does not load it.
constexpr auto kFirstPoll = std::chrono::microseconds(50);
constexpr auto kMaxPoll = std::chrono::milliseconds(10);

}  // namespace

SendLedger::SendLedger(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout)
    : store_(std::move(store)),
      rank_(rank),
      size_(size),
      timeout_(timeout),
      received_(size, 0),
      pending_(size, 0),
      announcer_([this] { announceLoop(); }) {}

SendLedger::~SendLedger() {
  {
    std::lock_guard<std::mutex> lock(pendingMu_);
    stop_ = true;
  }
  pendingCv_.notify_all();
  announcer_.join();
}

void SendLedger::announceSend(int dst) {
  if (dst == rank_) return;  // a receive from any source does not look at this rank itself
  {
    std::lock_guard<std::mutex> lock(pendingMu_);
    ++pending_[dst];
  }
  pendingCv_.notify_one();
}

void SendLedger::announceLoop() {
  std::vector<int64_t> batch(size_, 0);
  std::unique_lock<std::mutex> lock(pendingMu_);
  for (;;) {
    pendingCv_.wait(lock, [&] {
      return stop_ || std::any_of(pending_.begin(), pending_.end(), [](int64_t n) { return n > 0; });
    });
    if (stop_) return;
    batch.swap(pending_);
    lock.unlock();
    try {
      std::lock_guard<std::mutex> storeLock(storeMu_);
      for (int dst = 0; dst < size_; ++dst)
        if (batch[dst] > 0) store_->add(sentKey(rank_, dst), batch[dst]);
    } catch (const std::exception& e) {
      // The store is gone (its server, rank 0, exited or failed): a receive
      // from any source on a peer then fails after its timeout, naming it.
      LOG(WARNING) << "gyre backend: rank " << rank_ << " could not announce sends in the store: " << e.what();
    }
    std::fill(batch.begin(), batch.end(), 0);
    lock.lock();
  }
}

void SendLedger::noteReceive(int src) { ++received_[src]; }

int64_t SendLedger::announced(int src) {
  std::lock_guard<std::mutex> lock(storeMu_);
  return store_->add(sentKey(src, rank_), 0);
}

int SendLedger::waitForSender() {
  TORCH_CHECK(size_ > 1, "gyre backend: recv without a source in a group of one rank: no other rank can send");
  auto start = std::chrono::steady_clock::now();
  std::chrono::microseconds pause = kFirstPoll;
  bool forever = timeout_.count() <= 0;
  for (;;) {
    for (int i = 0; i < size_; ++i) {
      int src = (next_ + i) % size_;
      if (src == rank_) continue;
      if (announced(src) > received_[src]) {
        next_ = (src + 1) % size_;
        return src;
      }
    }
    TORCH_CHECK(!cancelled_.load(std::memory_order_acquire), "gyre backend: recv without a source on rank ", rank_,
                ": the process group was aborted");
    auto waited = std::chrono::steady_clock::now() - start;
    TORCH_CHECK(forever || waited < timeout_, "gyre backend: recv without a source on rank ", rank_,
                ": no rank of the group sent to it within the group's timeout of ", timeout_.count(), " ms");
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, kMaxPoll);
  }
}

}  // namespace torch_gyre
