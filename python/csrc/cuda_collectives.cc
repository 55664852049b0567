// The operations of CUDA tensors (cuda_backend_impl.h): each checks its
// tensors on the calling thread, so bad input raises at the call, and
// describes its gyre calls, which run() launches on the group's stream.
#include <c10/util/Exception.h>

#include "cuda_backend_impl.h"
#include "types.h"

namespace torch_gyre {

CudaBackend::WorkPtr CudaBackendImpl::allreduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op,
                                                c10d::OpType type, const char* what) {
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

CudaBackend::WorkPtr CudaBackendImpl::broadcast(at::Tensor& t, int root) {
  ncclDataType_t type = checkCuda(t, t.device(), "broadcast");
  return run("broadcast", c10d::OpType::BROADCAST, t.device(), {t}, {t},
             [this, t, type, root](ncclComm_t c, cudaStream_t s, Cleanups&) {
               void* p = t.data_ptr();
               comm_->check(ncclBroadcast(p, p, t.numel(), type, root, c, s), "ncclBroadcast");
             });
}

CudaBackend::WorkPtr CudaBackendImpl::reduce(at::Tensor& t, const c10d::ReduceOp& op, int root) {
  ncclDataType_t type = checkCuda(t, t.device(), "reduce");
  checkOp(op, "reduce");
  return run("reduce", c10d::OpType::REDUCE, t.device(), {t}, {t},
             [this, t, type, op, root](ncclComm_t c, cudaStream_t s, Cleanups& cl) {
               ncclRedOp_t o = opFor(op, t.scalar_type(), c, cl, "reduce");
               void* p = t.data_ptr();
               comm_->check(ncclReduce(p, p, t.numel(), type, o, root, c, s), "ncclReduce");
             });
}

CudaBackend::WorkPtr CudaBackendImpl::allgatherBase(at::Tensor& output, at::Tensor& input, const char* what) {
  ncclDataType_t type = checkCuda(input, input.device(), what);
  checkCuda(output, input.device(), what);
  checkSameKind(output, input, input.numel() * comm_->size(), what, "the output");
  return run(what, c10d::OpType::_ALLGATHER_BASE, input.device(), {input}, {output},
             [this, input, output, type](ncclComm_t c, cudaStream_t s, Cleanups&) {
               comm_->check(ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), type, c, s),
                            "ncclAllGather");
             });
}

CudaBackend::WorkPtr CudaBackendImpl::allgather(std::vector<at::Tensor>& outputs, at::Tensor& input) {
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

CudaBackend::WorkPtr CudaBackendImpl::reduceScatterBase(at::Tensor& output, at::Tensor& input, const c10d::ReduceOp& op,
                                                        const char* what) {
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

CudaBackend::WorkPtr CudaBackendImpl::reduceScatter(at::Tensor& output, std::vector<at::Tensor>& inputs,
                                                    const c10d::ReduceOp& op) {
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

CudaBackend::WorkPtr CudaBackendImpl::alltoallBase(at::Tensor& output, at::Tensor& input,
                                                   const std::vector<int64_t>& outputSplits,
                                                   const std::vector<int64_t>& inputSplits) {
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

CudaBackend::WorkPtr CudaBackendImpl::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs) {
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

CudaBackend::WorkPtr CudaBackendImpl::gather(std::vector<at::Tensor>& outputs, at::Tensor& input, int root) {
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

CudaBackend::WorkPtr CudaBackendImpl::scatter(at::Tensor& output, std::vector<at::Tensor>& inputs, int root) {
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

CudaBackend::WorkPtr CudaBackendImpl::send(at::Tensor& t, int peer) {
  ncclDataType_t type = checkCuda(t, t.device(), "send");
  return run("send", c10d::OpType::SEND, t.device(), {t}, {t},
             [this, t, type, peer](ncclComm_t c, cudaStream_t s, Cleanups&) {
               comm_->check(ncclSend(t.data_ptr(), t.numel(), type, peer, c, s), "ncclSend");
             });
}

CudaBackend::WorkPtr CudaBackendImpl::recv(at::Tensor& t, int peer) {
  ncclDataType_t type = checkCuda(t, t.device(), "recv");
  return run("recv", c10d::OpType::RECV, t.device(), {t}, {t},
             [this, t, type, peer](ncclComm_t c, cudaStream_t s, Cleanups&) {
               comm_->check(ncclRecv(t.data_ptr(), t.numel(), type, peer, c, s), "ncclRecv");
             });
}

}  // namespace torch_gyre
