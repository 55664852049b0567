#include "tests/support/fake_cuda/hardware_queues.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace gyre {

void StreamOrder::queued() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++pending_;
  ++queuedTotal_;
}

// Notified under the lock: a synchronize() that returns may destroy nothing
// the finishing thread still touches (the command holds a reference besides).
void StreamOrder::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  --pending_;
  ++finishedTotal_;
  running_ = false;
  changed_.notify_all();
}

void StreamOrder::awaitPreviousFinished() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !running_; });
}

void StreamOrder::markStarted() {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = true;
}

void StreamOrder::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return pending_ == 0; });
}

uint64_t StreamOrder::queuedSoFar() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queuedTotal_;
}

bool StreamOrder::awaitFinished(uint64_t count, std::chrono::steady_clock::time_point until) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_until(lock, until, [&] { return finishedTotal_ >= count; });
}

bool StreamOrder::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_ == 0;
}

int ResidentBlocks::acquire(int blocks) {
  const int want = std::clamp(blocks, 1, total_);
  std::unique_lock<std::mutex> lock(mutex_);
  freed_.wait(lock, [&] { return free_ >= want; });
  free_ -= want;
  return want;
}

void ResidentBlocks::release(int taken) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_ += taken;
  freed_.notify_all();
}

void HardwareQueue::submit(std::shared_ptr<StreamOrder> stream, CommandKind kind, std::function<void()> op,
                           int blocks, ResidentBlocks* residency) {
  stream->queued();
  std::lock_guard<std::mutex> lock(mutex_);
  commands_.push_back(Command{std::move(stream), kind, std::move(op), blocks, residency});
  if (draining_) return;
  draining_ = true;
  std::thread([this] { drain(); }).detach();
}

void HardwareQueue::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!commands_.empty()) {
    Command c = std::move(commands_.front());
    commands_.pop_front();
    lock.unlock();
    // The head waits for the stream's previous command (and for resident
    // slots): nothing behind it on this queue starts meanwhile.
    c.stream->awaitPreviousFinished();
    if (c.kind == CommandKind::kAtHead) {
      c.op();
      c.stream->finished();
    } else {
      const int taken = c.blocks > 0 && c.residency ? c.residency->acquire(c.blocks) : 0;
      c.stream->markStarted();
      std::thread([c = std::move(c), taken] {
        c.op();
        if (taken) c.residency->release(taken);
        c.stream->finished();
      }).detach();
    }
    lock.lock();
  }
  draining_ = false;
}

int hardwareQueuesPerDevice() {
  const char* v = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const int n = v && *v ? atoi(v) : 8;
  return std::clamp(n, 1, 32);
}

}  // namespace gyre
