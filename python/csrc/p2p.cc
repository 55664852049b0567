// send, recv, all_to_all (list) and all_to_all_single (even or uneven splits).
#include <c10/util/Exception.h>

#include "process_group.h"
#include "tensors.h"
#include "types.h"

namespace torch_gyre {

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  // Tags are not matched: sends and receives between a pair of ranks pair
  // up in issue order, as gyre's (and NCCL's) do.
  at::Tensor& t = single(tensors, "send");
  checkPeer(dstRank, "send destination");
  if (CudaBackend* cuda = cudaFor("send", {&t})) return cuda->send(t, dstRank);
  ncclDataType_t type = checkTensor(t, "send");
  Dense src(t);
  Op op;
  op.p2p = true;
  op.launch = [src, type, dstRank](ncclComm_t c, Cleanups&) {
    check(ncclSend(src.data(), src.count(), type, dstRank, c, nullptr), "ncclSend", c);
  };
  ledger_->announceSend(dstRank);
  return enqueue(c10d::OpType::SEND, {t}, std::move(op));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  at::Tensor& t = single(tensors, "recv");
  checkPeer(srcRank, "recv source");
  if (CudaBackend* cuda = cudaFor("recv", {&t})) return cuda->recv(t, srcRank);
  ncclDataType_t type = checkTensor(t, "recv");
  Dense dst(t);
  SendLedger* ledger = ledger_.get();
  Op op;
  op.p2p = true;
  op.launch = [dst, type, srcRank, ledger](ncclComm_t c, Cleanups&) {
    ledger->noteReceive(srcRank);
    check(ncclRecv(dst.data(), dst.count(), type, srcRank, c, nullptr), "ncclRecv", c);
  };
  op.finish = [dst] { dst.writeBack(); };
  auto work = enqueue(c10d::OpType::RECV, {t}, std::move(op));
  static_cast<GyreWork*>(work.get())->setSource(std::make_shared<std::atomic<int>>(srcRank));
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::recvAnysource(std::vector<at::Tensor>& tensors, int /*tag*/) {
  at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK(cudaFor("recv", {&t}) == nullptr,
              "gyre backend: recv without src runs CPU tensors only; name the source rank for a CUDA tensor");
  ncclDataType_t type = checkTensor(t, "recv");
  Dense dst(t);
  SendLedger* ledger = ledger_.get();
  auto source = std::make_shared<std::atomic<int>>(-1);
  Op op;
  // Not held back with other sends and receives: it runs alone, after them,
  // so the group it would otherwise join cannot wait on a send that a peer
  // issues only after this rank's earlier operations completed.
  op.p2p = false;
  op.launch = [dst, type, ledger, source](ncclComm_t c, Cleanups&) {
    int src = ledger->waitForSender();
    ledger->noteReceive(src);
    source->store(src, std::memory_order_release);
    check(ncclRecv(dst.data(), dst.count(), type, src, c, nullptr), "ncclRecv", c);
  };
  op.finish = [dst] { dst.writeBack(); };
  auto work = enqueue(c10d::OpType::RECVANYSOURCE, {t}, std::move(op));
  static_cast<GyreWork*>(work.get())->setSource(source);
  return work;
}

namespace {

// The element offsets of `splits` rows of `rowNumel` elements each, or an
// even split of `rows` over `size` ranks when `splits` is empty.
std::vector<int64_t> rowCounts(const std::vector<int64_t>& splits, int64_t rows, int size, const char* arg) {
  std::vector<int64_t> counts(size);
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "gyre backend: all_to_all_single: ", arg, " has ", rows,
                " rows, which do not split evenly over ", size, " ranks; pass split sizes");
    std::fill(counts.begin(), counts.end(), rows / size);
    return counts;
  }
  TORCH_CHECK(static_cast<int>(splits.size()) == size, "gyre backend: all_to_all_single: ", arg, " split sizes have ",
              splits.size(), " entries for ", size, " ranks");
  int64_t total = 0;
  for (int64_t s : splits) {
    TORCH_CHECK(s >= 0, "gyre backend: all_to_all_single: negative split size ", s, " in ", arg);
    total += s;
  }
  TORCH_CHECK(total == rows, "gyre backend: all_to_all_single: ", arg, " split sizes add up to ", total,
              " rows, but the tensor has ", rows);
  return splits;
}

// One grouped exchange: block r of `send` goes to rank r, block r of `recv`
// comes from it. This rank's own block is copied locally.
struct Exchange {
  std::vector<at::Tensor> send, recv;  // per rank, dense 1-D views
};

Op exchangeOp(Exchange ex, ncclDataType_t type, int me, std::function<void()> finish) {
  Op op;
  op.launch = [ex, type, me](ncclComm_t c, Cleanups&) {
    ex.recv[me].copy_(ex.send[me]);
    // One group per exchange, so every pair's send and receive progress
    // together and no rank waits on a send that its peer has not reached.
    check(ncclGroupStart(), "ncclGroupStart", c);
    for (int r = 0; r < static_cast<int>(ex.send.size()); ++r) {
      if (r == me) continue;
      if (ex.send[r].numel() > 0)
        check(ncclSend(ex.send[r].data_ptr(), ex.send[r].numel(), type, r, c, nullptr), "ncclSend", c);
      if (ex.recv[r].numel() > 0)
        check(ncclRecv(ex.recv[r].data_ptr(), ex.recv[r].numel(), type, r, c, nullptr), "ncclRecv", c);
    }
    check(ncclGroupEnd(), "ncclGroupEnd", c);
  };
  op.finish = std::move(finish);
  return op;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions& /*opts*/) {
  const char* what = "all_to_all_single";
  if (CudaBackend* cuda = cudaFor(what, {&input, &output}))
    return cuda->alltoallBase(output, input, outputSplits, inputSplits);
  ncclDataType_t type = checkTensor(input, what);
  checkTensor(output, what);
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "gyre backend: ", what, ": output dtype ",
              c10::toString(output.scalar_type()), " differs from input dtype ", c10::toString(input.scalar_type()));
  int64_t inRows = input.dim() > 0 ? input.size(0) : 1;
  int64_t outRows = output.dim() > 0 ? output.size(0) : 1;
  int64_t inRow = inRows > 0 ? input.numel() / inRows : 0;
  int64_t outRow = outRows > 0 ? output.numel() / outRows : 0;
  std::vector<int64_t> inCounts = rowCounts(inputSplits, inRows, getSize(), "input");
  std::vector<int64_t> outCounts = rowCounts(outputSplits, outRows, getSize(), "output");
  Dense src(input), dst(output);
  at::Tensor srcFlat = src.buf.reshape({-1}), dstFlat = dst.buf.view({-1});
  Exchange ex;
  int64_t inOff = 0, outOff = 0;
  for (int r = 0; r < getSize(); ++r) {
    ex.send.push_back(srcFlat.narrow(0, inOff, inCounts[r] * inRow));
    ex.recv.push_back(dstFlat.narrow(0, outOff, outCounts[r] * outRow));
    inOff += inCounts[r] * inRow;
    outOff += outCounts[r] * outRow;
  }
  TORCH_CHECK(ex.send[getRank()].numel() == ex.recv[getRank()].numel(), "gyre backend: ", what, ": this rank (",
              getRank(), ") sends itself ", ex.send[getRank()].numel(), " elements but expects ",
              ex.recv[getRank()].numel());
  return enqueue(c10d::OpType::ALLTOALL_BASE, {output},
                 exchangeOp(std::move(ex), type, getRank(), [dst] { dst.writeBack(); }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& /*opts*/) {
  const char* what = "all_to_all";
  TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() && static_cast<int>(outputs.size()) == getSize(),
              "gyre backend: ", what, " needs ", getSize(), " input and output tensors, got ", inputs.size(), " and ",
              outputs.size());
  if (CudaBackend* cuda = cudaFor(what, {}, {&inputs, &outputs})) return cuda->alltoall(outputs, inputs);
  ncclDataType_t type = checkTensor(inputs[0], what);
  Exchange ex;
  std::vector<Dense> dsts;
  for (int r = 0; r < getSize(); ++r) {
    checkTensor(inputs[r], what);
    checkTensor(outputs[r], what);
    TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                    outputs[r].scalar_type() == inputs[0].scalar_type(),
                "gyre backend: ", what, ": all tensors must have one dtype");
    dsts.emplace_back(outputs[r]);
    ex.send.push_back(Dense(inputs[r]).buf.view({-1}));
    ex.recv.push_back(dsts.back().buf.view({-1}));
  }
  TORCH_CHECK(ex.send[getRank()].numel() == ex.recv[getRank()].numel(), "gyre backend: ", what,
              ": this rank's own input and output tensors differ in size");
  return enqueue(c10d::OpType::ALLTOALL, outputs, exchangeOp(std::move(ex), type, getRank(), [dsts] {
                   for (const Dense& d : dsts) d.writeBack();
                 }));
}

}  // namespace torch_gyre
