// CUDA tensors on gyre's device communicator of the group (cuda_backend.h).
// Compiled only with a CUDA torch: it needs c10/cuda (current streams, the
// caching allocator's recordStream).
#include "cuda_backend.h"

#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include "communicator.h"
#include "cuda_work.h"
#include "device/device_comm.h"
#include "device/stream_work.h"
#include "types.h"

namespace torch_gyre {

// The same alias as op_queue.h's (legal to repeat; the two files may share a
// unity translation unit).
using Cleanups = std::vector<std::function<void()>>;

namespace {

// The gyre calls of one operation, on the group's communicator and stream,
// with the group's stream current for torch (for the copies some need).
using Calls = std::function<void(ncclComm_t, cudaStream_t, Cleanups&)>;

constexpr const char* kDeviceIdKey = "torch_gyre/device_unique_id";

// A CUDA tensor gyre may use on `device`: dense, contiguous, of a type gyre
// reduces; else a RuntimeError naming the operation and the problem.
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

class CudaBackendImpl final : public CudaBackend {
 public:
  CudaBackendImpl(std::unique_ptr<device::DeviceComm> comm, std::chrono::milliseconds timeout)
      : comm_(std::move(comm)), timeout_(timeout) {}

  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op, c10d::OpType type,
                    const char* what) override {
    TORCH_CHECK(!tensors.empty(), "gyre backend: ", what, " got no tensors");
    c10::Device dev = tensors[0].device();
    std::vector<ncclDataType_t> types;
    for (const at::Tensor& t : tensors) types.push_back(checkCuda(t, dev, what));
    checkOp(op, what);
    return run(what, type, dev, tensors, tensors, [this, tensors, types, op, what](ncclComm_t c, cudaStream_t s,
                                                                                  Cleanups& cl) {
      grouped(tensors.size() > 1, [&] {
        for (size_t i = 0; i < tensors.size(); ++i) {
          ncclRedOp_t o = opFor(op, tensors[i].scalar_type(), c, cl, what);
          void* p = tensors[i].data_ptr();
          comm_->check(ncclAllReduce(p, p, tensors[i].numel(), types[i], o, c, s), "ncclAllReduce");
        }
      });
    });
  }

  WorkPtr broadcast(at::Tensor& t, int root) override {
    ncclDataType_t type = checkCuda(t, t.device(), "broadcast");
    return run("broadcast", c10d::OpType::BROADCAST, t.device(), {t}, {t},
               [this, t, type, root](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 void* p = t.data_ptr();
                 comm_->check(ncclBroadcast(p, p, t.numel(), type, root, c, s), "ncclBroadcast");
               });
  }

  WorkPtr reduce(at::Tensor& t, const c10d::ReduceOp& op, int root) override {
    ncclDataType_t type = checkCuda(t, t.device(), "reduce");
    checkOp(op, "reduce");
    return run("reduce", c10d::OpType::REDUCE, t.device(), {t}, {t},
               [this, t, type, op, root](ncclComm_t c, cudaStream_t s, Cleanups& cl) {
                 ncclRedOp_t o = opFor(op, t.scalar_type(), c, cl, "reduce");
                 void* p = t.data_ptr();
                 comm_->check(ncclReduce(p, p, t.numel(), type, o, root, c, s), "ncclReduce");
               });
  }

  WorkPtr allgatherBase(at::Tensor& output, at::Tensor& input, const char* what) override {
    ncclDataType_t type = checkCuda(input, input.device(), what);
    checkCuda(output, input.device(), what);
    checkSameKind(output, input, input.numel() * comm_->size(), what, "the output");
    return run(what, c10d::OpType::_ALLGATHER_BASE, input.device(), {input}, {output},
               [this, input, output, type](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 comm_->check(ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), type, c, s),
                              "ncclAllGather");
               });
  }

  WorkPtr allgather(std::vector<at::Tensor>& outputs, at::Tensor& input) override {
    const char* what = "all_gather";
    ncclDataType_t type = checkCuda(input, input.device(), what);
    TORCH_CHECK(outputs.size() == static_cast<size_t>(comm_->size()), "gyre backend: all_gather needs one output per "
                "rank (", comm_->size(), "), got ", outputs.size());
    for (const at::Tensor& o : outputs) {
      checkCuda(o, input.device(), what);
      checkSameKind(o, input, input.numel(), what, "an output");
    }
    return run(what, c10d::OpType::ALLGATHER, input.device(), {input}, outputs,
               [this, input, outputs, type](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 // One gyre call into a flat buffer, then copies, all on the group's stream.
                 at::Tensor flat = at::empty({input.numel() * comm_->size()}, input.options());
                 comm_->check(ncclAllGather(input.data_ptr(), flat.data_ptr(), input.numel(), type, c, s),
                              "ncclAllGather");
                 for (size_t r = 0; r < outputs.size(); ++r)
                   outputs[r].copy_(flat.narrow(0, r * input.numel(), input.numel()).view(outputs[r].sizes()));
               });
  }

  WorkPtr reduceScatterBase(at::Tensor& output, at::Tensor& input, const c10d::ReduceOp& op,
                            const char* what) override {
    ncclDataType_t type = checkCuda(input, input.device(), what);
    checkCuda(output, input.device(), what);
    checkOp(op, what);
    checkSameKind(input, output, output.numel() * comm_->size(), what, "the input");
    return run(what, c10d::OpType::_REDUCE_SCATTER_BASE, input.device(), {input}, {output},
               [this, input, output, type, op, what](ncclComm_t c, cudaStream_t s, Cleanups& cl) {
                 ncclRedOp_t o = opFor(op, input.scalar_type(), c, cl, what);
                 comm_->check(ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), type, o, c, s),
                              "ncclReduceScatter");
               });
  }

  WorkPtr reduceScatter(at::Tensor& output, std::vector<at::Tensor>& inputs, const c10d::ReduceOp& op) override {
    const char* what = "reduce_scatter";
    ncclDataType_t type = checkCuda(output, output.device(), what);
    checkOp(op, what);
    TORCH_CHECK(inputs.size() == static_cast<size_t>(comm_->size()), "gyre backend: reduce_scatter needs one input "
                "per rank (", comm_->size(), "), got ", inputs.size());
    for (const at::Tensor& in : inputs) {
      checkCuda(in, output.device(), what);
      checkSameKind(in, output, output.numel(), what, "an input");
    }
    return run(what, c10d::OpType::REDUCE_SCATTER, output.device(), inputs, {output},
               [this, inputs, output, type, op, what](ncclComm_t c, cudaStream_t s, Cleanups& cl) {
                 std::vector<at::Tensor> flat;
                 for (const at::Tensor& in : inputs) flat.push_back(in.reshape({-1}));
                 at::Tensor packed = at::cat(flat);
                 ncclRedOp_t o = opFor(op, output.scalar_type(), c, cl, what);
                 comm_->check(ncclReduceScatter(packed.data_ptr(), output.data_ptr(), output.numel(), type, o, c, s),
                              "ncclReduceScatter");
               });
  }

  WorkPtr alltoallBase(at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outputSplits,
                       const std::vector<int64_t>& inputSplits) override {
    const char* what = "all_to_all_single";
    ncclDataType_t type = checkCuda(input, input.device(), what);
    checkCuda(output, input.device(), what);
    const int n = comm_->size();
    TORCH_CHECK(output.scalar_type() == input.scalar_type(), "gyre backend: ", what, ": output dtype ",
                c10::toString(output.scalar_type()), " differs from the input's ", c10::toString(input.scalar_type()));
    // Element offsets and counts per peer; splits count rows of dim 0.
    std::vector<size_t> sendCount(n), sendOff(n), recvCount(n), recvOff(n);
    layout(input, inputSplits, "input", sendCount, sendOff);
    layout(output, outputSplits, "output", recvCount, recvOff);
    const size_t elem = input.element_size();
    return run(what, c10d::OpType::ALLTOALL_BASE, input.device(), {input}, {output},
               [=, this](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 auto* in = static_cast<char*>(input.data_ptr());
                 auto* out = static_cast<char*>(output.data_ptr());
                 grouped(true, [&] {
                   for (int p = 0; p < n; ++p) {
                     comm_->check(ncclSend(in + sendOff[p] * elem, sendCount[p], type, p, c, s), "ncclSend");
                     comm_->check(ncclRecv(out + recvOff[p] * elem, recvCount[p], type, p, c, s), "ncclRecv");
                   }
                 });
               });
  }

  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) override {
    const char* what = "all_to_all";
    const size_t n = comm_->size();
    TORCH_CHECK(outputs.size() == n && inputs.size() == n, "gyre backend: all_to_all needs one input and one output "
                "per rank (", n, "), got ", inputs.size(), " and ", outputs.size());
    c10::Device dev = inputs[0].device();
    std::vector<ncclDataType_t> types;
    for (size_t p = 0; p < n; ++p) {
      types.push_back(checkCuda(inputs[p], dev, what));
      checkCuda(outputs[p], dev, what);
      TORCH_CHECK(outputs[p].scalar_type() == inputs[p].scalar_type(), "gyre backend: all_to_all: output ", p,
                  " has dtype ", c10::toString(outputs[p].scalar_type()), ", input ", p, " ",
                  c10::toString(inputs[p].scalar_type()));
    }
    return run(what, c10d::OpType::ALLTOALL, dev, inputs, outputs,
               [this, inputs, outputs, types](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 grouped(true, [&] {
                   for (size_t p = 0; p < inputs.size(); ++p) {
                     int peer = static_cast<int>(p);
                     comm_->check(ncclSend(inputs[p].data_ptr(), inputs[p].numel(), types[p], peer, c, s), "ncclSend");
                     comm_->check(ncclRecv(outputs[p].data_ptr(), outputs[p].numel(), types[p], peer, c, s),
                                  "ncclRecv");
                   }
                 });
               });
  }

  WorkPtr gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) override {
    const char* what = "gather";
    ncclDataType_t type = checkCuda(input, input.device(), what);
    const bool isRoot = root == comm_->rank();
    if (isRoot) {
      TORCH_CHECK(outputs.size() == static_cast<size_t>(comm_->size()), "gyre backend: gather needs one output per "
                  "rank at the root (", comm_->size(), "), got ", outputs.size());
      for (const at::Tensor& o : outputs) {
        checkCuda(o, input.device(), what);
        checkSameKind(o, input, input.numel(), what, "an output");
      }
    }
    return run(what, c10d::OpType::GATHER, input.device(), {input}, outputs,
               [this, outputs, input, type, root, isRoot](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 grouped(true, [&] {
                   if (isRoot) {
                     for (size_t p = 0; p < outputs.size(); ++p)
                       comm_->check(ncclRecv(outputs[p].data_ptr(), input.numel(), type, static_cast<int>(p), c, s),
                                    "ncclRecv");
                   }
                   comm_->check(ncclSend(input.data_ptr(), input.numel(), type, root, c, s), "ncclSend");
                 });
               });
  }

  WorkPtr scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) override {
    const char* what = "scatter";
    ncclDataType_t type = checkCuda(output, output.device(), what);
    const bool isRoot = root == comm_->rank();
    if (isRoot) {
      TORCH_CHECK(inputs.size() == static_cast<size_t>(comm_->size()), "gyre backend: scatter needs one input per "
                  "rank at the root (", comm_->size(), "), got ", inputs.size());
      for (const at::Tensor& in : inputs) {
        checkCuda(in, output.device(), what);
        checkSameKind(in, output, output.numel(), what, "an input");
      }
    }
    return run(what, c10d::OpType::SCATTER, output.device(), inputs, {output},
               [this, inputs, output, type, root, isRoot](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 grouped(true, [&] {
                   if (isRoot) {
                     for (size_t p = 0; p < inputs.size(); ++p)
                       comm_->check(ncclSend(inputs[p].data_ptr(), output.numel(), type, static_cast<int>(p), c, s),
                                    "ncclSend");
                   }
                   comm_->check(ncclRecv(output.data_ptr(), output.numel(), type, root, c, s), "ncclRecv");
                 });
               });
  }

  WorkPtr send(at::Tensor& t, int peer) override {
    ncclDataType_t type = checkCuda(t, t.device(), "send");
    return run("send", c10d::OpType::SEND, t.device(), {t}, {t},
               [this, t, type, peer](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 comm_->check(ncclSend(t.data_ptr(), t.numel(), type, peer, c, s), "ncclSend");
               });
  }

  WorkPtr recv(at::Tensor& t, int peer) override {
    ncclDataType_t type = checkCuda(t, t.device(), "recv");
    return run("recv", c10d::OpType::RECV, t.device(), {t}, {t},
               [this, t, type, peer](ncclComm_t c, cudaStream_t s, Cleanups&) {
                 comm_->check(ncclRecv(t.data_ptr(), t.numel(), type, peer, c, s), "ncclRecv");
               });
  }

  void openBatch() override {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(!batch_, "gyre backend: coalescing started twice without ending");
    batch_.emplace();
  }

  WorkPtr closeBatch() override {
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
    Calls all = [this, ops](ncclComm_t c, cudaStream_t s, Cleanups& cl) {
      grouped(true, [&] {
        for (const Pending& p : ops) p.calls(c, s, cl);
      });
    };
    auto launched = launch("coalesced operations", dev, inputs, outputs, all);
    for (const Pending& p : ops) p.work->attach(launched.first, launched.second);
    batchWork->attach(launched.first, launched.second);
    return batchWork;
  }

  void bind(int device) override { comm_->bind(device); }
  bool bound() const override { return comm_->bound(); }
  void abort() override { comm_->abort(); }
  void shutdown() override { comm_->shutdown(); }

  std::unique_ptr<CudaBackend> split(int color, int key, std::chrono::milliseconds timeout) override {
    TORCH_CHECK(comm_->bound(), "gyre backend: split of a group whose device communicator is not made yet");
    auto child = comm_->split(comm_->device(), color, key, timeout.count() / 1000.0);
    if (child == nullptr) return nullptr;
    return std::make_unique<CudaBackendImpl>(std::move(child), timeout);
  }

 private:
  struct Pending {
    Calls calls;
    c10::Device device;
    std::vector<at::Tensor> inputs, outputs;
    c10::intrusive_ptr<CudaWork> work;
  };

  // `body` between ncclGroupStart and ncclGroupEnd when `group`.
  void grouped(bool group, const std::function<void()>& body) {
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

  // Splits of dim 0 (empty: equal) as element counts and offsets per peer.
  void layout(const at::Tensor& t, const std::vector<int64_t>& splits, const char* arg, std::vector<size_t>& count,
              std::vector<size_t>& offset) const {
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

  WorkPtr run(const char* what, c10d::OpType type, c10::Device dev, std::vector<at::Tensor> inputs,
              std::vector<at::Tensor> outputs, Calls calls) {
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

  std::pair<std::shared_ptr<device::StreamWork>, c10::cuda::CUDAStream> launch(const char* what, c10::Device dev,
                                                                              const std::vector<at::Tensor>& inputs,
                                                                              const std::vector<at::Tensor>& outputs,
                                                                              const Calls& calls) {
    c10::cuda::CUDAGuard deviceGuard(dev);
    c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(dev.index());
    Cleanups cleanups;
    std::optional<c10::cuda::CUDAStream> group;
    std::shared_ptr<device::StreamWork> work;
    try {
      work = device::StreamWork::launch(*comm_, dev.index(), caller.stream(), what,
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

  std::unique_ptr<device::DeviceComm> comm_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::optional<std::vector<Pending>> batch_;
};

}  // namespace

std::unique_ptr<CudaBackend> makeCudaBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                             std::chrono::milliseconds timeout) {
  device::StreamOps* ops = device::cudaStreamOps();
  if (ops == nullptr) return nullptr;
  auto exchange = [store, rank] { return exchangeUniqueId(store, rank, kDeviceIdKey); };
  auto comm = std::make_unique<device::DeviceComm>(*ops, rank, size, timeout.count() / 1000.0, exchange);
  return std::make_unique<CudaBackendImpl>(std::move(comm), timeout);
}

const char* cudaAbsentReason() { return "the CUDA runtime was not found when torch_gyre was built"; }

}  // namespace torch_gyre
