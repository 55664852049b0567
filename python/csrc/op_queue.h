// The process group's worker: one thread runs the group's gyre calls in the
// order they were issued. gyre's host calls block their thread until the
// data has moved, so running them here is what makes async_op=True
// asynchronous; the order is what keeps every rank's call sequence the same.
//
// Point-to-point operations are held back until their partners are queued:
// `isend(a); irecv(b); wait()` on two ranks that exchange large messages
// would deadlock if each rank's send ran alone, so consecutive sends and
// receives start together in one ncclGroupStart/End — when a wait() asks
// for them, when a collective is queued behind them, or after a short quiet
// period (for code that only polls is_completed()).
//
// A wait() on a collective the worker has not started yet runs it on the
// waiting thread instead (runIfNext): a synchronous call, which torch
// waits for at once, then costs no hand-off to the worker and back. Each
// hand-off wakes a sleeping thread, tens of microseconds on a VM, and where
// ranks outnumber cores the worker sleeps between calls. Only one thread
// runs a task at a time, so the order stays the issue order.
#pragma once

#include <chrono>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gyre.h>

#include "work.h"

namespace torch_gyre {

// Work to run after a launch, whether it succeeded or not (destroying a
// PREMUL_SUM operator that a grouped call used until the group ended).
using Cleanups = std::vector<std::function<void()>>;

// One torch operation, prepared (checked, buffers made dense) on the calling
// thread, so argument errors raise there at once.
struct Op {
  std::function<void(ncclComm_t, Cleanups&)> launch;  // the gyre calls; throws on failure
  std::function<void()> finish;                       // after success: copy results out
  c10::intrusive_ptr<GyreWork> work;
  bool p2p = false;
};

class OpQueue {
 public:
  // `onFailure` runs on the worker when a gyre call fails (the group is then
  // unusable: its ranks may have diverged or died).
  // `poll`: whether an idle worker polls briefly for the next op before
  // sleeping (op_queue.cc); off where ranks may outnumber cores.
  OpQueue(ncclComm_t comm, std::function<void()> onFailure, bool poll);
  ~OpQueue();  // stop()

  // Runs what is queued, then stops the worker. Returns once no thread runs
  // a task of this queue (a waiter's included), so the communicator can go.
  void stop();

  // Queues ops that run as one ncclGroupStart/End when `grouped`; returns
  // the task's number for runIfNext.
  uint64_t submit(std::vector<Op> ops, bool grouped);
  // Runs task `seq` on this thread if it is next, is not point-to-point
  // (those wait for their partners) and no thread runs a task now; returns
  // whether it did. Failures complete the task's works as on the worker.
  bool runIfNext(uint64_t seq);
  void flush();
  // Tasks runIfNext ran so far.
  uint64_t runByWaiters() const { return runByWaiters_.load(std::memory_order_relaxed); }

 private:
  struct Task {
    std::vector<Op> ops;
    bool grouped = false;
    bool p2p = false;
    uint64_t seq = 0;  // submission number
  };
  void loop();
  Task next(std::unique_lock<std::mutex>& lock);
  void execute(Task& task);

  ncclComm_t comm_;
  std::function<void()> onFailure_;
  bool poll_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  // tasks_.size(), readable without mu_ while the worker spins for the next op.
  std::atomic<size_t> queued_{0};
  std::atomic<uint64_t> runByWaiters_{0};
  bool stop_ = false;
  bool running_ = false;  // a thread (the worker or a waiter) runs a task
  uint64_t submitted_ = 0;
  // Tasks submitted before a wait() asked for a flush (seq < flushBefore_)
  // are not held back.
  uint64_t flushBefore_ = 0;
  std::chrono::steady_clock::time_point lastP2P_;
  std::string error_;  // the first failure; every later op fails with it (read by the running thread only)
  std::thread worker_;
};

}  // namespace torch_gyre
