#include "op_queue.h"

#include <exception>

#include "communicator.h"

namespace torch_gyre {

namespace {
// How long held sends and receives wait for partners when nobody asks for
// them. Issuing the partner ops of one exchange takes microseconds; this
// only delays code that never calls wait().
constexpr auto kP2PQuiet = std::chrono::milliseconds(5);

// How long an idle worker polls for the next op before sleeping on the
// condition variable. A program that calls collectives back to back issues
// the next one within microseconds, and waking a sleeping thread costs tens
// of microseconds on a VM: it was most of a small all_reduce's time through
// torch (53 us against gyre's own 0.3 us). But with ranks oversubscribed a
// polling thread takes a core from the ranks that move the data, so it is
// off where the group has more ranks than this host has cores.
constexpr auto kIdlePoll = std::chrono::microseconds(50);
}  // namespace

OpQueue::OpQueue(ncclComm_t comm, std::function<void()> onFailure, bool poll)
    : comm_(comm), onFailure_(std::move(onFailure)), poll_(poll), worker_([this] { loop(); }) {}

OpQueue::~OpQueue() { stop(); }

void OpQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The worker leaves only when nothing is queued and no waiter runs a
  // task (loop()), so after the join none runs or can start.
  if (worker_.joinable()) worker_.join();
}

uint64_t OpQueue::submit(std::vector<Op> ops, bool grouped) {
  Task t;
  uint64_t seq = 0;
  t.p2p = !ops.empty();
  for (const Op& op : ops) t.p2p = t.p2p && op.p2p;
  t.ops = std::move(ops);
  t.grouped = grouped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (t.p2p) lastP2P_ = std::chrono::steady_clock::now();
    t.seq = submitted_++;
    seq = t.seq;
    tasks_.push_back(std::move(t));
    queued_.store(tasks_.size(), std::memory_order_release);
  }
  cv_.notify_all();
  return seq;
}

bool OpQueue::runIfNext(uint64_t seq) {
  Task task;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_ || tasks_.empty() || tasks_.front().seq != seq || tasks_.front().p2p) return false;
    task = std::move(tasks_.front());
    tasks_.pop_front();
    queued_.store(tasks_.size(), std::memory_order_release);
    running_ = true;
  }
  runByWaiters_.fetch_add(1, std::memory_order_relaxed);
  execute(task);
  bool more;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    more = !tasks_.empty() || stop_;
  }
  // The worker waits for this run to end only when there is more to do; a
  // wake-up for nothing takes a core from the ranks where they outnumber it.
  if (more) cv_.notify_all();
  return true;
}

void OpQueue::flush() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    flushBefore_ = submitted_;
  }
  cv_.notify_all();
}

OpQueue::Task OpQueue::next(std::unique_lock<std::mutex>& lock) {
  auto blockedBehind = [&] {  // a collective follows the leading p2p tasks
    size_t n = 0;
    while (n < tasks_.size() && tasks_[n].p2p) ++n;
    return n < tasks_.size();
  };
  while (tasks_.front().p2p) {
    bool blocked = blockedBehind();
    if (blocked || tasks_.front().seq < flushBefore_ || stop_) break;
    if (cv_.wait_until(lock, lastP2P_ + kP2PQuiet) == std::cv_status::timeout &&
        std::chrono::steady_clock::now() >= lastP2P_ + kP2PQuiet)
      break;
  }
  Task task;
  if (!tasks_.front().p2p) {
    task = std::move(tasks_.front());
    tasks_.pop_front();
    return task;
  }
  task.grouped = true;
  task.p2p = true;
  while (!tasks_.empty() && tasks_.front().p2p) {
    for (Op& op : tasks_.front().ops) task.ops.push_back(std::move(op));
    tasks_.pop_front();
  }
  return task;
}

void OpQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (poll_ && tasks_.empty() && !stop_) {
      lock.unlock();
      auto until = std::chrono::steady_clock::now() + kIdlePoll;
      while (queued_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
      lock.lock();
    }
    cv_.wait(lock, [&] { return !running_ && (stop_ || !tasks_.empty()); });
    if (tasks_.empty()) return;  // stopped and drained
    Task task = next(lock);
    queued_.store(tasks_.size(), std::memory_order_release);
    running_ = true;
    lock.unlock();
    execute(task);
    lock.lock();
    running_ = false;
  }
}

void OpQueue::execute(Task& task) {
  Cleanups cleanups;
  try {
    if (!error_.empty())
      throw std::runtime_error("gyre backend: the process group failed earlier and runs no more operations: " +
                               error_);
    try {
      if (task.grouped) check(ncclGroupStart(), "ncclGroupStart", comm_);
      for (Op& op : task.ops)
        if (op.launch) op.launch(comm_, cleanups);
      if (task.grouped) check(ncclGroupEnd(), "ncclGroupEnd", comm_);
    } catch (const std::exception& e) {
      // A group left open would swallow the next task's calls.
      if (task.grouped) ncclGroupEnd();
      if (error_.empty()) error_ = e.what();
      onFailure_();
      throw;
    }
    for (auto& c : cleanups) c();
    cleanups.clear();
    for (Op& op : task.ops)
      if (op.finish) op.finish();
  } catch (const std::exception& e) {
    for (auto& c : cleanups) c();
    for (Op& op : task.ops) op.work->fail(e.what());
    return;
  }
  for (Op& op : task.ops) op.work->complete();
}

}  // namespace torch_gyre
