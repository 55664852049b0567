#include "process_group.h"

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
      ledger_(std::make_unique<SendLedger>(store, rank, size, timeout)) {
  Communicator* comm = comm_.get();
  queue_ = std::make_shared<OpQueue>(comm->get(), [comm] { comm->markBroken(); }, poll_);
}

ProcessGroupGyre::~ProcessGroupGyre() { close(/*abort=*/false); }

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
  if (batch_) {
    for (Op& op : ops) batch_->push_back(std::move(op));
  } else {
    bool grouped = ops.size() > 1;
    queue_->submit(std::move(ops), grouped);
  }
  return work;
}

void ProcessGroupGyre::openBatch() {
  std::lock_guard<std::mutex> lock(submitMu_);
  TORCH_CHECK(!batch_, "gyre backend: coalescing started twice without ending");
  batch_.emplace();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::closeBatch() {
  std::lock_guard<std::mutex> lock(submitMu_);
  TORCH_CHECK(closedBy_ == nullptr, "gyre backend: the process group was closed by ", closedBy_,
              "() and runs no more operations");
  TORCH_CHECK(batch_, "gyre backend: endCoalescing without startCoalescing");
  std::vector<Op> ops = std::move(*batch_);
  batch_.reset();
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

}  // namespace torch_gyre
