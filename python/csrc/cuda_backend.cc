// CUDA tensors on gyre's device communicator of the group (cuda_backend.h):
// launching operations in stream order, coalescing, splitting, and the
// checks the operations (cuda_collectives.cc) share. Compiled only with a
// CUDA torch: it needs c10/cuda (current streams, the caching allocator's
// recordStream).
#include <numeric>
#include <string>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include "communicator.h"
#include "cuda_backend_impl.h"
#include "types.h"

namespace torch_gyre {

namespace {

constexpr const char* kDeviceIdKey = "torch_gyre/device_unique_id";

}  // namespace

ncclDataType_t checkCuda(const at::Tensor& t, c10::Device device, const char* what) {
  TORCH_CHECK(t.defined(), "gyre backend: ", what, " got an undefined tensor");
  TORCH_CHECK(t.device() == device, "gyre backend: ", what, " got tensors on ", device.str(), " and ",
              t.device().str(), " in one call (one device per call)");
  TORCH_CHECK(t.layout() == at::kStrided, "gyre backend: ", what, " supports dense (strided) tensors only, got ",
              t.layout());
  TORCH_CHECK(t.is_contiguous(), "gyre backend: ", what, " got a non-contiguous CUDA tensor (sizes ", t.sizes(),
              ", strides ", t.strides(), "); call .contiguous() first");
  return toNcclType(t.scalar_type(), what);
}

void checkSameKind(const at::Tensor& t, const at::Tensor& like, int64_t numel, const char* what, const char* arg) {
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "gyre backend: ", what, ": ", arg, " has dtype ",
              c10::toString(t.scalar_type()), " but the input has ", c10::toString(like.scalar_type()));
  TORCH_CHECK(t.numel() == numel, "gyre backend: ", what, ": ", arg, " has ", t.numel(), " elements, expected ", numel);
}

void CudaBackendImpl::openBatch() {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(!batch_, "gyre backend: coalescing started twice without ending");
  batch_.emplace();
}

CudaBackend::WorkPtr CudaBackendImpl::closeBatch() {
  std::vector<Pending> ops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(batch_, "gyre backend: endCoalescing without startCoalescing");
    ops = std::move(*batch_);
    batch_.reset();
  }
  if (ops.empty()) return {};
  c10::Device dev = ops.front().device;
  std::vector<at::Tensor> inputs, outputs;
  for (const Pending& p : ops) {
    TORCH_CHECK(p.device == dev, "gyre backend: a coalescing batch has CUDA operations on ", dev.str(), " and ",
                p.device.str());
    inputs.insert(inputs.end(), p.inputs.begin(), p.inputs.end());
    outputs.insert(outputs.end(), p.outputs.begin(), p.outputs.end());
  }
  auto batchWork = c10::make_intrusive<CudaWork>(comm_->rank(), c10d::OpType::UNKNOWN, outputs, dev);
  CudaCalls all = [this, ops](ncclComm_t c, cudaStream_t s, Cleanups& cl) {
    grouped(true, [&] {
      for (const Pending& p : ops) p.calls(c, s, cl);
    });
  };
  auto launched = launch("coalesced operations", dev, inputs, outputs, all);
  for (const Pending& p : ops) p.work->attach(launched.first, launched.second);
  batchWork->attach(launched.first, launched.second);
  return batchWork;
}

std::unique_ptr<CudaBackend> CudaBackendImpl::split(int color, int key, std::chrono::milliseconds timeout) {
  TORCH_CHECK(comm_->bound(), "gyre backend: split of a group whose device communicator is not made yet");
  auto child = comm_->split(comm_->device(), color, key, timeout.count() / 1000.0);
  if (child == nullptr) return nullptr;
  return std::make_unique<CudaBackendImpl>(std::shared_ptr<device::DeviceComm>(std::move(child)));
}

void CudaBackendImpl::grouped(bool group, const std::function<void()>& body) {
  if (!group) return body();
  comm_->check(ncclGroupStart(), "ncclGroupStart");
  try {
    body();
  } catch (...) {
    ncclGroupEnd();  // ends the group the failed call was part of; its own error is the one reported
    throw;
  }
  comm_->check(ncclGroupEnd(), "ncclGroupEnd");
}

void CudaBackendImpl::layout(const at::Tensor& t, const std::vector<int64_t>& splits, const char* arg,
                             std::vector<size_t>& count, std::vector<size_t>& offset) const {
  const int n = comm_->size();
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t rowElems = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> s = splits;
  if (s.empty()) {
    TORCH_CHECK(rows % n == 0, "gyre backend: all_to_all_single: the ", arg, "'s ", rows,
                " rows do not split equally over ", n, " ranks");
    s.assign(n, rows / n);
  }
  TORCH_CHECK(static_cast<int>(s.size()) == n, "gyre backend: all_to_all_single: ", s.size(), " ", arg,
              " splits for ", n, " ranks");
  TORCH_CHECK(std::accumulate(s.begin(), s.end(), int64_t(0)) == rows, "gyre backend: all_to_all_single: the ",
              arg, " splits add up to other than its ", rows, " rows");
  size_t at = 0;
  for (int p = 0; p < n; ++p) {
    offset[p] = at;
    count[p] = static_cast<size_t>(s[p] * rowElems);
    at += count[p];
  }
}

CudaBackend::WorkPtr CudaBackendImpl::run(const char* what, c10d::OpType type, c10::Device dev,
                                          std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
                                          CudaCalls calls) {
  auto work = c10::make_intrusive<CudaWork>(comm_->rank(), type, outputs, dev);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (batch_) {
      batch_->push_back(Pending{std::move(calls), dev, std::move(inputs), std::move(outputs), work});
      return work;
    }
  }
  auto launched = launch(what, dev, inputs, outputs, calls);
  work->attach(launched.first, launched.second);
  return work;
}

std::pair<std::shared_ptr<device::StreamWork>, c10::cuda::CUDAStream> CudaBackendImpl::launch(
    const char* what, c10::Device dev, const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs,
    const CudaCalls& calls) {
  c10::cuda::CUDAGuard deviceGuard(dev);
  c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(dev.index());
  Cleanups cleanups;
  std::optional<c10::cuda::CUDAStream> group;
  std::shared_ptr<device::StreamWork> work;
  try {
    work = device::StreamWork::launch(comm_, dev.index(), caller.stream(), what,
                                      [&](ncclComm_t c, cudaStream_t s) {
                                        group = c10::cuda::getStreamFromExternal(s, dev.index());
                                        c10::cuda::CUDAStreamGuard onGroup(*group);
                                        calls(c, s, cleanups);
                                      });
  } catch (...) {
    for (auto& f : cleanups) f();
    throw;
  }
  for (auto& f : cleanups) f();
  // The caching allocator must not hand these blocks to another stream
  // before the group's stream is done with them; the StreamWork also
  // holds the tensors until their end is seen.
  for (const auto* list : {&inputs, &outputs}) {
    for (const at::Tensor& t : *list) {
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *group);
      work->hold(std::make_shared<at::Tensor>(t));
    }
  }
  return {work, *group};
}

std::unique_ptr<CudaBackend> makeCudaBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                             std::chrono::milliseconds timeout) {
  device::StreamOps* ops = device::cudaStreamOps();
  if (ops == nullptr) return nullptr;
  auto exchange = [store, rank] { return exchangeUniqueId(store, rank, kDeviceIdKey); };
  auto comm = std::make_shared<device::DeviceComm>(*ops, rank, size, timeout.count() / 1000.0, exchange);
  return std::make_unique<CudaBackendImpl>(std::move(comm));
}

const char* cudaAbsentReason() { return "the CUDA runtime was not found when torch_gyre was built"; }

}  // namespace torch_gyre
