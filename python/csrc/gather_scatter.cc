// all_gather (list, into one tensor, coalesced), gather, scatter,
// reduce_scatter (list, from one tensor).
#include <c10/util/Exception.h>

#include "process_group.h"
#include "tensors.h"
#include "types.h"

namespace torch_gyre {

namespace {

// ncclAllGather of `in` into a fresh flat buffer, then copied into the
// list `outs` (one tensor per rank).
Op allgatherListOp(const at::Tensor& in, std::vector<at::Tensor> outs, int size, const char* what) {
  ncclDataType_t type = checkTensor(in, what);
  TORCH_CHECK(static_cast<int>(outs.size()) == size, "gyre backend: ", what, " needs an output list of ", size,
              " tensors (one per rank), got ", outs.size());
  for (const at::Tensor& o : outs) {
    checkTensor(o, what);
    checkShape(o, in.numel(), in.scalar_type(), what, "an output tensor");
  }
  Dense src(in);
  at::Tensor flat = at::empty({in.numel() * size}, in.options());
  Op op;
  op.launch = [src, flat, type](ncclComm_t c, Cleanups&) {
    check(ncclAllGather(src.data(), flat.data_ptr(), src.count(), type, c, nullptr), "ncclAllGather", c);
  };
  op.finish = [flat, outs]() mutable { copySlicesInto(flat, outs); };
  return op;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& /*opts*/) {
  at::Tensor& in = single(inputs, "all_gather");
  TORCH_CHECK(outputs.size() == 1, "gyre backend: all_gather takes one output list per process, got ",
              outputs.size());
  if (CudaBackend* cuda = cudaFor("all_gather", {&in}, {&outputs[0]})) return cuda->allgather(outputs[0], in);
  return enqueue(c10d::OpType::ALLGATHER, outputs[0], allgatherListOp(in, outputs[0], getSize(), "all_gather"));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  // torch's layout: one output list per rank, holding that rank's copy of
  // every input (outputLists[rank][input]).
  const char* what = "all_gather_coalesced";
  TORCH_CHECK(!inputs.empty(), "gyre backend: ", what, " got no input tensors");
  TORCH_CHECK(static_cast<int>(outputLists.size()) == getSize(), "gyre backend: ", what, " needs one output list per ",
              "rank (", getSize(), "), got ", outputLists.size());
  for (size_t r = 0; r < outputLists.size(); ++r)
    TORCH_CHECK(outputLists[r].size() == inputs.size(), "gyre backend: ", what, ": the output list of rank ", r,
                " has ", outputLists[r].size(), " tensors, expected one per input (", inputs.size(), ")");
  std::vector<const std::vector<at::Tensor>*> lists{&inputs};
  for (const auto& list : outputLists) lists.push_back(&list);
  TORCH_CHECK(cudaFor(what, {}, lists) == nullptr, "gyre backend: ", what,
              " runs CPU tensors only; for CUDA tensors use all_gather_into_tensor (one call per tensor)");
  std::vector<Op> ops;
  std::vector<at::Tensor> all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<at::Tensor> perRank;
    for (const auto& list : outputLists) perRank.push_back(list[i]);
    ops.push_back(allgatherListOp(inputs[i], perRank, getSize(), what));
  }
  for (const auto& list : outputLists) all.insert(all.end(), list.begin(), list.end());
  return enqueueGroup(c10d::OpType::ALLGATHER_COALESCED, all, std::move(ops));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& /*opts*/) {
  const char* what = "all_gather_into_tensor";
  if (CudaBackend* cuda = cudaFor(what, {&input, &output})) return cuda->allgatherBase(output, input, what);
  ncclDataType_t type = checkTensor(input, what);
  checkTensor(output, what);
  checkShape(output, input.numel() * getSize(), input.scalar_type(), what, "the output tensor");
  Dense src(input), dst(output);
  Op op;
  op.launch = [src, dst, type](ncclComm_t c, Cleanups&) {
    check(ncclAllGather(src.data(), dst.data(), src.count(), type, c, nullptr), "ncclAllGather", c);
  };
  op.finish = [dst] { dst.writeBack(); };
  return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  const char* what = "gather";
  at::Tensor& in = single(inputs, what);
  int root = static_cast<int>(opts.rootRank);
  checkPeer(root, "gather root");
  if (CudaBackend* cuda = cudaFor(what, {&in}, outputs.empty() ? std::vector<const std::vector<at::Tensor>*>{}
                                                                 : std::vector<const std::vector<at::Tensor>*>{&outputs[0]})) {
    std::vector<at::Tensor> none;
    TORCH_CHECK(getRank() == root || outputs.empty() || outputs[0].empty(),
                "gyre backend: gather takes output tensors only at the root");
    return cuda->gather(getRank() == root && !outputs.empty() ? outputs[0] : none, in, root);
  }
  ncclDataType_t type = checkTensor(in, what);
  std::vector<at::Tensor> outs;
  at::Tensor flat;
  if (getRank() == root) {
    TORCH_CHECK(outputs.size() == 1, "gyre backend: gather needs one output list at the root, got ", outputs.size());
    outs = outputs[0];
    TORCH_CHECK(static_cast<int>(outs.size()) == getSize(), "gyre backend: gather needs ", getSize(),
                " output tensors at the root, got ", outs.size());
    for (const at::Tensor& o : outs) {
      checkTensor(o, what);
      checkShape(o, in.numel(), in.scalar_type(), what, "an output tensor");
    }
    flat = at::empty({in.numel() * getSize()}, in.options());
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "gyre backend: gather takes output tensors only at the root");
  }
  Dense src(in);
  Op op;
  op.launch = [src, flat, type, root](ncclComm_t c, Cleanups&) {
    void* recv = flat.defined() ? flat.data_ptr() : nullptr;
    check(ncclGather(src.data(), recv, src.count(), type, root, c, nullptr), "ncclGather", c);
  };
  op.finish = [flat, outs]() mutable {
    if (flat.defined()) copySlicesInto(flat, outs);
  };
  return enqueue(c10d::OpType::GATHER, outs, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  const char* what = "scatter";
  at::Tensor& out = single(outputs, what);
  int root = static_cast<int>(opts.rootRank);
  checkPeer(root, "scatter root");
  if (CudaBackend* cuda = cudaFor(what, {&out}, inputs.empty() ? std::vector<const std::vector<at::Tensor>*>{}
                                                               : std::vector<const std::vector<at::Tensor>*>{&inputs[0]})) {
    std::vector<at::Tensor> none;
    TORCH_CHECK(getRank() == root || inputs.empty() || inputs[0].empty(),
                "gyre backend: scatter takes input tensors only at the root");
    return cuda->scatter(out, getRank() == root && !inputs.empty() ? inputs[0] : none, root);
  }
  ncclDataType_t type = checkTensor(out, what);
  at::Tensor flat;
  if (getRank() == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(), "gyre backend: scatter needs ",
                getSize(), " input tensors at the root");
    for (const at::Tensor& i : inputs[0]) {
      checkTensor(i, what);
      checkShape(i, out.numel(), out.scalar_type(), what, "an input tensor");
    }
    flat = concat(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "gyre backend: scatter takes input tensors only at the root");
  }
  Dense dst(out);
  Op op;
  op.launch = [flat, dst, type, root](ncclComm_t c, Cleanups&) {
    const void* send = flat.defined() ? flat.data_ptr() : nullptr;
    check(ncclScatter(send, dst.data(), dst.count(), type, root, c, nullptr), "ncclScatter", c);
  };
  op.finish = [dst] { dst.writeBack(); };
  return enqueue(c10d::OpType::SCATTER, {out}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter";
  at::Tensor& out = single(outputs, what);
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(), "gyre backend: reduce_scatter ",
              "needs an input list of ", getSize(), " tensors (one per rank)");
  if (CudaBackend* cuda = cudaFor(what, {&out}, {&inputs[0]})) return cuda->reduceScatter(out, inputs[0], opts.reduceOp);
  ncclDataType_t type = checkTensor(out, what);
  for (const at::Tensor& i : inputs[0]) {
    checkTensor(i, what);
    checkShape(i, out.numel(), out.scalar_type(), what, "an input tensor");
  }
  at::Tensor flat = concat(inputs[0]);
  Dense dst(out);
  c10d::ReduceOp rop = opts.reduceOp;
  at::ScalarType st = out.scalar_type();
  checkOp(rop, what);
  Op op;
  op.launch = [flat, dst, type, rop, st](ncclComm_t c, Cleanups& cl) {
    ncclRedOp_t o = opFor(rop, st, c, cl, "reduce_scatter");
    check(ncclReduceScatter(flat.data_ptr(), dst.data(), dst.count(), type, o, c, nullptr), "ncclReduceScatter", c);
  };
  op.finish = [dst] { dst.writeBack(); };
  return enqueue(c10d::OpType::REDUCE_SCATTER, {out}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor";
  if (CudaBackend* cuda = cudaFor(what, {&input, &output}))
    return cuda->reduceScatterBase(output, input, opts.reduceOp, what);
  ncclDataType_t type = checkTensor(output, what);
  checkTensor(input, what);
  checkShape(input, output.numel() * getSize(), output.scalar_type(), what, "the input tensor");
  checkOp(opts.reduceOp, what);
  Dense src(input), dst(output);
  c10d::ReduceOp rop = opts.reduceOp;
  at::ScalarType st = output.scalar_type();
  Op op;
  op.launch = [src, dst, type, rop, st](ncclComm_t c, Cleanups& cl) {
    ncclRedOp_t o = opFor(rop, st, c, cl, "reduce_scatter_tensor");
    check(ncclReduceScatter(src.data(), dst.data(), dst.count(), type, o, c, nullptr), "ncclReduceScatter", c);
  };
  op.finish = [dst] { dst.writeBack(); };
  return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, std::move(op));
}

}  // namespace torch_gyre
