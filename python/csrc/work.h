// A c10d::Work that a gyre operation completes from the process group's
// worker thread. Completion both wakes wait() and fulfils the future that
// DDP's communication hooks chain on (get_future()), so the two never
// disagree: one call, complete() or fail(), does both.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/ivalue.h>

#include "compat.h"

namespace torch_gyre {

class GyreWork : public c10d::Work {
 public:
  // `outputs` is what result() and the future's value hold: the tensors the
  // operation writes (for DDP, the bucket it all-reduced in place).
  GyreWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);

  // Called by wait() before it blocks, so point-to-point operations that the
  // worker holds back to start together with their partners start now.
  void setFlushHook(std::function<void()> hook) { flush_ = std::move(hook); }
  // Called next by a wait() without timeout: runs the operation on the
  // waiting thread if the worker has not started it (OpQueue::runIfNext).
  // Set before the Work is returned to torch.
  void setRunHook(std::function<void()> hook) { run_ = std::move(hook); }
  // Whether wait() polls briefly before sleeping (work.cc).
  void setPoll(bool poll) { poll_ = poll; }

  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // The rank a receive got its message from (what recv() without src
  // returns): `source` is written by the worker when the receive is posted.
  void setSource(std::shared_ptr<std::atomic<int>> source) { source_ = std::move(source); }
  int sourceRank() const override;

  void complete();
  void fail(const std::string& message);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::function<void()> flush_;
  std::function<void()> run_;
  std::shared_ptr<std::atomic<int>> source_;
  // Set after finish(): wait() polls it briefly before sleeping (see work.cc).
  std::atomic<bool> done_{false};
  bool poll_ = false;
};

}  // namespace torch_gyre
