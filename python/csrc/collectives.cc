// all_reduce, all_reduce_coalesced, broadcast, reduce, barrier.
#include <c10/util/Exception.h>

#include "process_group.h"
#include "tensors.h"
#include "types.h"

namespace torch_gyre {

namespace {

Op allreduceOp(const at::Tensor& t, const c10d::ReduceOp& rop, const char* what) {
  ncclDataType_t type = checkTensor(t, what);
  checkOp(rop, what);
  Dense d(t);
  at::ScalarType st = t.scalar_type();
  Op op;
  op.launch = [d, type, rop, st, what](ncclComm_t c, Cleanups& cl) {
    ncclRedOp_t o = opFor(rop, st, c, cl, what);
    check(ncclAllReduce(d.data(), d.data(), d.count(), type, o, c, nullptr), "ncclAllReduce", c);
  };
  op.finish = [d] { d.writeBack(); };
  return op;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  at::Tensor& t = single(tensors, "all_reduce");
  if (CudaBackend* cuda = cudaFor("all_reduce", {&t}))
    return cuda->allreduce(tensors, opts.reduceOp, c10d::OpType::ALLREDUCE, "all_reduce");
  return enqueue(c10d::OpType::ALLREDUCE, {t}, allreduceOp(t, opts.reduceOp, "all_reduce"));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  if (CudaBackend* cuda = cudaFor("all_reduce_coalesced", {}, {&tensors}))
    return cuda->allreduce(tensors, opts.reduceOp, c10d::OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced");
  std::vector<Op> ops;
  for (const at::Tensor& t : tensors) ops.push_back(allreduceOp(t, opts.reduceOp, "all_reduce_coalesced"));
  TORCH_CHECK(!ops.empty(), "gyre backend: all_reduce_coalesced got no tensors");
  return enqueueGroup(c10d::OpType::ALLREDUCE_COALESCED, tensors, std::move(ops));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  at::Tensor& t = single(tensors, "broadcast");
  checkPeer(static_cast<int>(opts.rootRank), "broadcast root");
  if (CudaBackend* cuda = cudaFor("broadcast", {&t})) return cuda->broadcast(t, static_cast<int>(opts.rootRank));
  ncclDataType_t type = checkTensor(t, "broadcast");
  Dense d(t);
  int root = static_cast<int>(opts.rootRank);
  Op op;
  op.launch = [d, type, root](ncclComm_t c, Cleanups&) {
    check(ncclBroadcast(d.data(), d.data(), d.count(), type, root, c, nullptr), "ncclBroadcast", c);
  };
  op.finish = [d] { d.writeBack(); };
  return enqueue(c10d::OpType::BROADCAST, {t}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  at::Tensor& t = single(tensors, "reduce");
  checkPeer(static_cast<int>(opts.rootRank), "reduce root");
  if (CudaBackend* cuda = cudaFor("reduce", {&t})) return cuda->reduce(t, opts.reduceOp, static_cast<int>(opts.rootRank));
  ncclDataType_t type = checkTensor(t, "reduce");
  checkOp(opts.reduceOp, "reduce");
  Dense d(t);
  int root = static_cast<int>(opts.rootRank);
  c10d::ReduceOp rop = opts.reduceOp;
  at::ScalarType st = t.scalar_type();
  Op op;
  op.launch = [d, type, root, rop, st](ncclComm_t c, Cleanups& cl) {
    ncclRedOp_t o = opFor(rop, st, c, cl, "reduce");
    check(ncclReduce(d.data(), d.data(), d.count(), type, o, root, c, nullptr), "ncclReduce", c);
  };
  bool isRoot = root == getRank();
  op.finish = [d, isRoot] {
    if (isRoot) d.writeBack();
  };
  return enqueue(c10d::OpType::REDUCE, {t}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::barrier(const c10d::BarrierOptions& /*opts*/) {
  // A one-element all-reduce, queued behind everything issued before it:
  // when it completes, every rank has reached it and this rank's earlier
  // operations have finished.
  at::Tensor token = at::zeros({1}, at::kFloat);
  return enqueue(c10d::OpType::BARRIER, {}, allreduceOp(token, c10d::ReduceOp::SUM, "barrier"));
}

}  // namespace torch_gyre
