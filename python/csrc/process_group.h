// The torch.distributed backend "gyre": every c10d operation on CPU tensors,
// run by a gyre host-memory communicator, and on CUDA tensors, run by the
// group's device communicator on torch's current stream (cuda_backend.h).
//
// Each CPU operation is checked and prepared on the calling thread (so a bad
// dtype, op, device or size raises at the call), then queued to the group's
// worker (op_queue.h), which completes its Work and future. A call's tensors
// are all on the CPU or all on one CUDA device; a mix raises.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "any_source.h"
#include "communicator.h"
#include "compat.h"
#include "cuda_backend.h"
#include "op_queue.h"

namespace torch_gyre {

class ProcessGroupGyre : public compat::BackendAdapter {
 public:
  ProcessGroupGyre(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  // A group split from another (splitGroup): its host communicator already
  // made, its CUDA side split or made lazily.
  ProcessGroupGyre(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
                   ncclComm_t hostComm, std::unique_ptr<CudaBackend> cuda);
  ~ProcessGroupGyre() override;

  const std::string getBackendName() const override { return "gyre"; }

  // Collectives (collectives.cc).
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Gathering and scattering (gather_scatter.cc).
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;

  // Point to point and all-to-all (p2p.cc).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

  // torch 2.x's coalesced all_gather_into_tensor and reduce_scatter_tensor
  // (coalesced.cc): one operation per pair, all in one gyre group.
  c10::intrusive_ptr<c10d::Work> allgatherIntoTensorCoalesced(std::vector<at::Tensor>& outputs,
                                                              std::vector<at::Tensor>& inputs) override;
  c10::intrusive_ptr<c10d::Work> reduceScatterTensorCoalesced(std::vector<at::Tensor>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::ReduceScatterOptions& opts) override;

  // Sequence numbers: how many collectives on CPU tensors this group has
  // issued. Every rank starts at 0 when the group is made, so they agree
  // without exchanging anything; a rank whose number differs from the
  // others' issued a different sequence of collectives.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return seqCollective_.load(); }

  void openBatch() override;
  c10::intrusive_ptr<c10d::Work> closeBatch() override;
  bool batchOpen();
  // Drops the open batch's CPU operations unsubmitted (one of them was refused).
  void abandonBatch();

  // Lifecycle (lifecycle.cc), what torch 2.x's abort() and shutdown() call.
  // After either, the group runs no more operations.
  // Stops at once: gyre's operation in flight and those queued fail.
  void abortNow() override;
  // Runs what is queued, then destroys the communicator.
  void shutdownNow() override;

  // How many CPU operations ran on the thread that waited for them instead
  // of the worker (OpQueue::runIfNext), for tests.
  uint64_t opsRunByWaiters() const;

  // The members `ranks` (ranks of this group, sorted) as a new group split
  // from this one (ncclCommSplit of the host communicator, and of the device
  // communicator when it is made): collective over this group; nullptr on a
  // rank outside `ranks`. What torch 2.x's split() runs where it exists.
  c10::intrusive_ptr<ProcessGroupGyre> splitGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                  const std::vector<int>& ranks, std::chrono::milliseconds timeout);
  c10::intrusive_ptr<compat::BackendBase> splitMembers(const c10::intrusive_ptr<c10d::Store>& store,
                                                       const std::vector<int>& ranks,
                                                       std::chrono::milliseconds timeout) override {
    return splitGroup(store, ranks, timeout);
  }
  // Makes the device communicator now, on cuda:`device` (torch's device_id).
  void bindDevice(int device) override;

 private:
  // Wraps `op` in a Work over `outputs` and queues it (or adds it to the open
  // batch); returns the Work.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs, Op op);
  // Several ops that run as one group and complete together under one Work.
  c10::intrusive_ptr<c10d::Work> enqueueGroup(c10d::OpType type, std::vector<at::Tensor> outputs, std::vector<Op> ops);
  c10::intrusive_ptr<GyreWork> makeWork(c10d::OpType type, std::vector<at::Tensor> outputs);
  void checkPeer(int peer, const char* what) const;
  // The CUDA side when the call's tensors are CUDA tensors, nullptr when
  // they are CPU ones; raises for a mix of devices, for CUDA tensors in a
  // build without CUDA, and after abort or shutdown.
  CudaBackend* cudaFor(const char* what, const std::vector<const at::Tensor*>& tensors,
                       const std::vector<const std::vector<at::Tensor>*>& lists = {});
  // Stops the worker and releases the communicator (abort: without waiting
  // for the peers); idempotent.
  void close(bool abort);

  // Declared before queue_: the worker stops before the communicator goes.
  std::unique_ptr<Communicator> comm_;
  bool poll_;
  // Counts sends and receives for recv without a source (any_source.h);
  // used by ops on the worker, so it outlives queue_.
  std::unique_ptr<SendLedger> ledger_;
  std::shared_ptr<OpQueue> queue_;
  // CUDA tensors; nullptr in a build without CUDA.
  std::unique_ptr<CudaBackend> cuda_;
  std::chrono::milliseconds timeout_;
  // Ops may be issued from several threads (DDP's autograd thread and the
  // main thread): the batch and the order of submission are guarded here.
  std::mutex submitMu_;
  std::optional<std::vector<Op>> batch_;  // open between openBatch and closeBatch
  std::atomic<uint64_t> seqCollective_{0};
  const char* closedBy_ = nullptr;         // "abort" or "shutdown" once closed (under submitMu_)
};

}  // namespace torch_gyre
