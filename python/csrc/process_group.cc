#include "process_group.h"

#include <algorithm>
#include <thread>

#include <c10/util/Exception.h>

#include "gil.h"

namespace torch_gyre {

ProcessGroupGyre::ProcessGroupGyre(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : compat::BackendAdapter(rank, size),
      comm_(std::make_unique<Communicator>(store, rank, size, timeout)),
      // Polling for ops and completions (op_queue.cc, work.cc) only where
      // every rank of the group could have a core of this host to itself.
      poll_(size <= static_cast<int>(std::thread::hardware_concurrency())),
      ledger_(std::make_unique<SendLedger>(store, rank, size, timeout)),
      cuda_(makeCudaBackend(store, rank, size, timeout)),
      timeout_(timeout) {
  Communicator* comm = comm_.get();
  queue_ = std::make_shared<OpQueue>(comm->get(), [comm] { comm->markBroken(); }, poll_);
}

ProcessGroupGyre::ProcessGroupGyre(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, ncclComm_t hostComm,
                                   std::unique_ptr<CudaBackend> cuda)
    : compat::BackendAdapter(rank, size),
      comm_(std::make_unique<Communicator>(hostComm, timeout)),
      poll_(size <= static_cast<int>(std::thread::hardware_concurrency())),
      ledger_(std::make_unique<SendLedger>(store, rank, size, timeout)),
      cuda_(std::move(cuda)),
      timeout_(timeout) {
  Communicator* comm = comm_.get();
  queue_ = std::make_shared<OpQueue>(comm->get(), [comm] { comm->markBroken(); }, poll_);
}

ProcessGroupGyre::~ProcessGroupGyre() { close(/*abort=*/false); }

namespace {

// What a sequence number counts: collectives, not point-to-point operations
// nor gyre's own bookkeeping (UNKNOWN: splits, a batch's closing marker).
bool isCollective(c10d::OpType type) {
  switch (type) {
    case c10d::OpType::SEND:
    case c10d::OpType::RECV:
    case c10d::OpType::RECVANYSOURCE:
    case c10d::OpType::UNKNOWN:
      return false;
    default:
      return true;
  }
}

}  // namespace

c10::intrusive_ptr<GyreWork> ProcessGroupGyre::makeWork(c10d::OpType type, std::vector<at::Tensor> outputs) {
  auto work = c10::make_intrusive<GyreWork>(getRank(), type, std::move(outputs));
  work->setPoll(poll_);
  std::weak_ptr<OpQueue> queue = queue_;
  work->setFlushHook([queue] {
    if (auto q = queue.lock()) q->flush();
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::enqueue(c10d::OpType type, std::vector<at::Tensor> outputs, Op op) {
  std::vector<Op> ops;
  ops.push_back(std::move(op));
  return enqueueGroup(type, std::move(outputs), std::move(ops));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::enqueueGroup(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                              std::vector<Op> ops) {
  auto work = makeWork(type, std::move(outputs));
  for (Op& op : ops) op.work = work;
  // Only the last op of a group completes its Work: the ops share it, and
  // it must not report success before all of them ran.
  for (size_t i = 0; i + 1 < ops.size(); ++i) ops[i].work = makeWork(type, {});
  std::lock_guard<std::mutex> lock(submitMu_);
  TORCH_CHECK(closedBy_ == nullptr, "gyre backend: the process group was closed by ", closedBy_,
              "() and runs no more operations");
  if (isCollective(type)) seqCollective_.fetch_add(1);
  if (batch_) {
    for (Op& op : ops) batch_->push_back(std::move(op));
  } else {
    bool grouped = ops.size() > 1;
    const uint64_t seq = queue_->submit(std::move(ops), grouped);
    std::weak_ptr<OpQueue> queue = queue_;
    work->setRunHook([queue, seq] {
      if (auto q = queue.lock()) q->runIfNext(seq);
    });
  }
  return work;
}

uint64_t ProcessGroupGyre::opsRunByWaiters() const { return queue_ ? queue_->runByWaiters() : 0; }

void ProcessGroupGyre::openBatch() {
  std::lock_guard<std::mutex> lock(submitMu_);
  TORCH_CHECK(!batch_, "gyre backend: coalescing started twice without ending");
  batch_.emplace();
  if (cuda_) cuda_->openBatch();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::closeBatch() {
  std::lock_guard<std::mutex> lock(submitMu_);
  TORCH_CHECK(closedBy_ == nullptr, "gyre backend: the process group was closed by ", closedBy_,
              "() and runs no more operations");
  TORCH_CHECK(batch_, "gyre backend: endCoalescing without startCoalescing");
  std::vector<Op> ops = std::move(*batch_);
  batch_.reset();
  // The CUDA operations of the batch run as one gyre group on the device
  // communicator; a batch of CUDA operations only returns that group's Work.
  c10::intrusive_ptr<c10d::Work> cudaWork = cuda_ ? cuda_->closeBatch() : c10::intrusive_ptr<c10d::Work>();
  if (ops.empty() && cudaWork) return cudaWork;
  // One more Work for the batch as a whole (what torch 2.x returns to the
  // caller); the queue completes ops in order, so it completes last.
  Op marker;
  marker.work = makeWork(c10d::OpType::UNKNOWN, {});
  auto batchWork = marker.work;
  ops.push_back(std::move(marker));
  queue_->submit(std::move(ops), /*grouped=*/true);
  return batchWork;
}

void ProcessGroupGyre::checkPeer(int peer, const char* what) const {
  TORCH_CHECK(peer >= 0 && peer < getSize(), "gyre backend: ", what, ": rank ", peer, " is outside the group of ",
              getSize());
}

CudaBackend* ProcessGroupGyre::cudaFor(const char* what, const std::vector<const at::Tensor*>& tensors,
                                       const std::vector<const std::vector<at::Tensor>*>& lists) {
  const at::Tensor* onCuda = nullptr;
  const at::Tensor* elsewhere = nullptr;
  auto see = [&](const at::Tensor& t) {
    if (!t.defined()) return;
    (t.is_cuda() ? onCuda : elsewhere) = &t;
  };
  for (const at::Tensor* t : tensors) see(*t);
  for (const auto* list : lists)
    for (const at::Tensor& t : *list) see(t);
  if (onCuda == nullptr) return nullptr;
  TORCH_CHECK(elsewhere == nullptr, "gyre backend: ", what, " got tensors on ", onCuda->device().str(), " and ",
              elsewhere->device().str(), " in one call (all of a call's tensors must be on one device)");
  TORCH_CHECK(cuda_ != nullptr, "gyre backend: ", what, " got a tensor on ", onCuda->device().str(), ", but ",
              cudaAbsentReason(), "; use backend=\"cpu:gyre,cuda:nccl\" or move the tensor to the CPU");
  std::lock_guard<std::mutex> lock(submitMu_);
  TORCH_CHECK(closedBy_ == nullptr, "gyre backend: ", what, ": the process group was closed by ", closedBy_,
              "() and runs no more operations");
  return cuda_.get();
}

void ProcessGroupGyre::bindDevice(int device) {
  TORCH_CHECK(cuda_ != nullptr, "gyre backend: device_id cuda:", device, " given, but ", cudaAbsentReason());
  cuda_->bind(device);
}

c10::intrusive_ptr<ProcessGroupGyre> ProcessGroupGyre::splitGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                                  const std::vector<int>& ranks,
                                                                  std::chrono::milliseconds timeout) {
  for (int r : ranks) checkPeer(r, "split member");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  TORCH_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
              "gyre backend: split: a rank is listed twice");
  const bool member = std::binary_search(sorted.begin(), sorted.end(), getRank());
  // Every rank of this group calls; the members share one color, ordered by
  // their rank here, so a member's new rank is its place in `sorted`.
  const int color = member ? 0 : NCCL_SPLIT_NOCOLOR;
  const int key = getRank();
  // On the worker, in order with the group's other operations: the host
  // communicator is the worker's to call.
  auto child = std::make_shared<ncclComm_t>(nullptr);
  Op op;
  op.launch = [child, color, key](ncclComm_t c, Cleanups&) {
    check(ncclCommSplit(c, color, key, child.get(), nullptr), "ncclCommSplit", c);
  };
  enqueue(c10d::OpType::UNKNOWN, {}, std::move(op))->wait(kNoTimeout);
  std::unique_ptr<CudaBackend> cuda;
  const int newRank = static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), getRank()) - sorted.begin());
  const int newSize = static_cast<int>(sorted.size());
  if (cuda_ && cuda_->bound()) {
    cuda = cuda_->split(color, key, timeout);
  } else if (member) {
    cuda = makeCudaBackend(store, newRank, newSize, timeout);
  }
  if (!member) return {};
  TORCH_CHECK(*child != nullptr, "gyre backend: split: rank ", getRank(), " is a member but got no communicator");
  return c10::make_intrusive<ProcessGroupGyre>(store, newRank, newSize, timeout, *child, std::move(cuda));
}

}  // namespace torch_gyre
