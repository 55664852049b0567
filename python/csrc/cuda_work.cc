// GCC 12 warns that the stream guard inside torch's Future::markCompleted
// (ivalue_inl.h, inlined into attach) may be used uninitialised: a false
// positive about its optional<VirtualGuardImpl>, reported at the header's
// line, so the pragma must come before the headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "cuda_work.h"

#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

namespace torch_gyre {

CudaWork::CudaWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, c10::Device device)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      device_(device),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       std::vector<c10::Device>{device})) {}

void CudaWork::attach(std::shared_ptr<device::StreamWork> work, c10::cuda::CUDAStream groupStream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = std::move(work);
  }
  // A CUDA future records its completion on the current streams: make that
  // the group's, so whoever waits on the future waits for the operation.
  c10::cuda::CUDAStreamGuard guard(groupStream);
  future_->markCompleted(at::IValue(outputs_));
}

std::shared_ptr<device::StreamWork> CudaWork::launched(const char* call) {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(work_ != nullptr, "gyre backend: ", call,
              "() on an operation of a coalescing batch that has not ended yet (end the batch first)");
  return work_;
}

bool CudaWork::isCompleted() { return launched("is_completed")->isCompleted(); }

bool CudaWork::wait(std::chrono::milliseconds timeout) {
  auto work = launched("wait");
  work->blockStream(c10::cuda::getCurrentCUDAStream(device_.index()).stream());
  if (timeout != kNoTimeout) work->synchronize(timeout);
  return true;
}

void CudaWork::synchronize() { wait(kNoTimeout); }

}  // namespace torch_gyre
