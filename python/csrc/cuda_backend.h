// The process group's CUDA tensors: what ProcessGroupGyre hands over when a
// call's tensors are on a CUDA device. Run by gyre's device communicator of
// the group (device/device_comm.h) on torch's current stream, with the
// stream semantics of torch's nccl backend (device/stream_work.h): the
// operation runs on the group's own stream after the caller's work, wait()
// makes the caller's current stream wait for it, the host does not block.
//
// Implemented in cuda_backend.cc where the torch being built against has
// CUDA (its c10/cuda headers and the CUDA runtime); elsewhere
// makeCudaBackend() returns nullptr and the process group refuses CUDA
// tensors, saying why.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "compat.h"

namespace torch_gyre {

class CudaBackend {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  virtual ~CudaBackend() = default;

  // Each tensor reduced in place; several run as one gyre group under one Work.
  virtual WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op, c10d::OpType type,
                            const char* what) = 0;
  virtual WorkPtr broadcast(at::Tensor& t, int root) = 0;
  virtual WorkPtr reduce(at::Tensor& t, const c10d::ReduceOp& op, int root) = 0;
  virtual WorkPtr allgatherBase(at::Tensor& output, at::Tensor& input, const char* what) = 0;
  virtual WorkPtr allgather(std::vector<at::Tensor>& outputs, at::Tensor& input) = 0;
  virtual WorkPtr reduceScatterBase(at::Tensor& output, at::Tensor& input, const c10d::ReduceOp& op,
                                    const char* what) = 0;
  virtual WorkPtr reduceScatter(at::Tensor& output, std::vector<at::Tensor>& inputs, const c10d::ReduceOp& op) = 0;
  // Empty splits: equal parts.
  virtual WorkPtr alltoallBase(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplits,
                               const std::vector<int64_t>& inputSplits) = 0;
  virtual WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) = 0;
  // `outputs`/`inputs`: one tensor per rank at the root, empty elsewhere.
  virtual WorkPtr gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) = 0;
  virtual WorkPtr scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) = 0;
  virtual WorkPtr send(at::Tensor& t, int peer) = 0;
  virtual WorkPtr recv(at::Tensor& t, int peer) = 0;

  // Coalescing: CUDA operations issued in between run as one gyre group
  // when the batch closes; closeBatch returns its Work, or nullptr when the
  // batch had no CUDA operation.
  virtual void openBatch() = 0;
  virtual WorkPtr closeBatch() = 0;

  // Makes the device communicator now, on `device` (torch's device_id).
  virtual void bind(int device) = 0;
  virtual bool bound() const = 0;
  virtual void abort() = 0;
  virtual void shutdown() = 0;
  // The CUDA side of a group split from this one (ncclCommSplit of the
  // device communicator; this group must be bound): collective over this
  // group; nullptr for a rank outside the new group (NCCL_SPLIT_NOCOLOR).
  virtual std::unique_ptr<CudaBackend> split(int color, int key, std::chrono::milliseconds timeout) = 0;
};

// The CUDA side of a new group, its device communicator made at the first
// CUDA operation (or bind()) with a unique id exchanged through `store`;
// nullptr where this torch_gyre was built without CUDA.
std::unique_ptr<CudaBackend> makeCudaBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                             std::chrono::milliseconds timeout);

// Why CUDA tensors are refused in a build without CUDA (for the error).
const char* cudaAbsentReason();

}  // namespace torch_gyre
