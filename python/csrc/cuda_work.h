// The c10d::Work of a CUDA operation: wait() makes the caller's current
// stream wait for the operation's end (the host does not block, as with
// torch's nccl backend) unless a timeout is given, which also blocks the
// host up to it; isCompleted() asks the end event; getFuture() is a CUDA
// future completed on the group's stream, so DDP's hooks chained on it run
// after the operation. Errors of the device path (a dead peer, gyre's
// asynchronous error) raise from each of them, naming the rank.
//
// Needs torch's c10/cuda headers: compiled only with a CUDA torch.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/ivalue.h>
#include <c10/cuda/CUDAStream.h>

#include "compat.h"
#include "device/stream_work.h"

namespace torch_gyre {

class CudaWork : public c10d::Work {
 public:
  CudaWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, c10::Device device);

  // Gives the Work its launched operation (at once, or when a coalescing
  // batch closes) and completes the future on `groupStream`.
  void attach(std::shared_ptr<device::StreamWork> work, c10::cuda::CUDAStream groupStream);

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::shared_ptr<device::StreamWork> launched(const char* call);

  std::vector<at::Tensor> outputs_;
  c10::Device device_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex mu_;
  std::shared_ptr<device::StreamWork> work_;
};

}  // namespace torch_gyre
