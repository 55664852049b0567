// The CUDA side of a process group (cuda_backend.h) as a class: its
// operations (cuda_collectives.cc) describe their gyre calls; launching them
// in stream order, coalescing, splitting and the checks every operation
// shares are in cuda_backend.cc. Needs torch's c10/cuda headers.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <c10/cuda/CUDAStream.h>

#include "cuda_backend.h"
#include "cuda_work.h"
#include "device/device_comm.h"
#include "device/stream_work.h"

namespace torch_gyre {

// The same alias as op_queue.h's (legal to repeat; the files may share a
// unity translation unit).
using Cleanups = std::vector<std::function<void()>>;

// The gyre calls of one operation, on the group's communicator and stream,
// with the group's stream current for torch (for the copies some need).
using CudaCalls = std::function<void(ncclComm_t, cudaStream_t, Cleanups&)>;

// A CUDA tensor gyre may use on `device`: dense, contiguous, of a type gyre
// reduces; else a RuntimeError naming the operation and the problem.
ncclDataType_t checkCuda(const at::Tensor& t, c10::Device device, const char* what);
// Throws unless `t` has `like`'s dtype and `numel` elements, naming `arg`.
void checkSameKind(const at::Tensor& t, const at::Tensor& like, int64_t numel, const char* what, const char* arg);

class CudaBackendImpl final : public CudaBackend {
 public:
  explicit CudaBackendImpl(std::shared_ptr<device::DeviceComm> comm) : comm_(std::move(comm)) {}

  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op, c10d::OpType type,
                    const char* what) override;
  WorkPtr broadcast(at::Tensor& t, int root) override;
  WorkPtr reduce(at::Tensor& t, const c10d::ReduceOp& op, int root) override;
  WorkPtr allgatherBase(at::Tensor& output, at::Tensor& input, const char* what) override;
  WorkPtr allgather(std::vector<at::Tensor>& outputs, at::Tensor& input) override;
  WorkPtr reduceScatterBase(at::Tensor& output, at::Tensor& input, const c10d::ReduceOp& op,
                            const char* what) override;
  WorkPtr reduceScatter(at::Tensor& output, std::vector<at::Tensor>& inputs, const c10d::ReduceOp& op) override;
  WorkPtr alltoallBase(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplits,
                       const std::vector<int64_t>& inputSplits) override;
  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) override;
  WorkPtr gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) override;
  WorkPtr scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) override;
  WorkPtr send(at::Tensor& t, int peer) override;
  WorkPtr recv(at::Tensor& t, int peer) override;

  void openBatch() override;
  WorkPtr closeBatch() override;
  void bind(int device) override { comm_->bind(device); }
  bool bound() const override { return comm_->bound(); }
  void abort() override { comm_->abort(); }
  void shutdown() override { comm_->shutdown(); }
  std::unique_ptr<CudaBackend> split(int color, int key, std::chrono::milliseconds timeout) override;

 private:
  struct Pending {
    CudaCalls calls;
    c10::Device device;
    std::vector<at::Tensor> inputs, outputs;
    c10::intrusive_ptr<CudaWork> work;
  };

  // `body` between ncclGroupStart and ncclGroupEnd when `group`.
  void grouped(bool group, const std::function<void()>& body);
  // Splits of dim 0 (empty: equal) as element counts and offsets per peer.
  void layout(const at::Tensor& t, const std::vector<int64_t>& splits, const char* arg, std::vector<size_t>& count,
              std::vector<size_t>& offset) const;
  // A Work for `calls`, launched now, or when the open coalescing batch closes.
  WorkPtr run(const char* what, c10d::OpType type, c10::Device dev, std::vector<at::Tensor> inputs,
              std::vector<at::Tensor> outputs, CudaCalls calls);
  std::pair<std::shared_ptr<device::StreamWork>, c10::cuda::CUDAStream> launch(const char* what, c10::Device dev,
                                                                              const std::vector<at::Tensor>& inputs,
                                                                              const std::vector<at::Tensor>& outputs,
                                                                              const CudaCalls& calls);

  // Shared with the operations' StreamWork: a Work may outlive its group.
  std::shared_ptr<device::DeviceComm> comm_;
  std::mutex mu_;
  std::optional<std::vector<Pending>> batch_;
};

}  // namespace torch_gyre
