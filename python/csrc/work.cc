#include "work.h"

#include <stdexcept>
#include <thread>

#include <c10/util/Exception.h>

namespace torch_gyre {

namespace {
// How long wait() polls for completion before sleeping on the condition
// variable: a small operation completes within microseconds, and a sleeping
// waiter's wake-up costs tens of them on a VM (the worker's side: op_queue.cc).
constexpr auto kWaitPoll = std::chrono::microseconds(50);
}  // namespace

GyreWork::GyreWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

bool GyreWork::wait(std::chrono::milliseconds timeout) {
  if (flush_) flush_();
  // Only an unbounded wait runs the operation itself: gyre's call then
  // blocks until it ends (or GYRE_TIMEOUT), past any shorter wait timeout.
  if (run_ && timeout == kNoTimeout && !done_.load(std::memory_order_acquire)) run_();
  auto until = std::chrono::steady_clock::now() + kWaitPoll;
  while (poll_ && !done_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    throw std::runtime_error("gyre: operation did not complete within the wait() timeout of " +
                             std::to_string(timeout.count()) + " ms");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

int GyreWork::sourceRank() const {
  int source = source_ ? source_->load(std::memory_order_acquire) : -1;
  TORCH_CHECK(source_, "gyre backend: sourceRank() is known only for a receive");
  TORCH_CHECK(source >= 0, "gyre backend: sourceRank() is known only after the receive ran (call wait() first)");
  return source;
}

void GyreWork::complete() {
  // The future first: a thread that wait() returns to may read the future's
  // value at once (DDP does), so it must already be marked.
  future_->markCompleted(c10::IValue(outputs_));
  finish();
  done_.store(true, std::memory_order_release);
}

void GyreWork::fail(const std::string& message) {
  auto error = std::make_exception_ptr(std::runtime_error(message));
  future_->setError(error);
  finish(error);
  done_.store(true, std::memory_order_release);
}

}  // namespace torch_gyre
