// torch 2.x's coalesced forms of all_gather_into_tensor and
// reduce_scatter_tensor: what _coalescing_manager calls for those issued
// inside it (with the batch it opened still open), and what a caller may
// call directly (then the pairs make a batch of their own).
#include <c10/util/Exception.h>

#include "process_group.h"

namespace torch_gyre {

namespace {

// Runs issue(i) for each pair inside the open batch, or inside one of its
// own; returns the batch's Work, or, inside a caller's batch, the last
// pair's (which completes after the others: the queue runs them in order).
template <class Issue>
c10::intrusive_ptr<c10d::Work> coalesce(ProcessGroupGyre& pg, bool batchOpen, const char* what, size_t outputs,
                                        size_t inputs, Issue issue) {
  TORCH_CHECK(outputs == inputs, "gyre backend: ", what, " got ", outputs, " outputs for ", inputs, " inputs");
  TORCH_CHECK(outputs > 0, "gyre backend: ", what, " got no tensors");
  if (batchOpen) {
    c10::intrusive_ptr<c10d::Work> last;
    for (size_t i = 0; i < outputs; ++i) last = issue(i);
    return last;
  }
  pg.openBatch();
  try {
    for (size_t i = 0; i < outputs; ++i) issue(i);
  } catch (...) {
    pg.abandonBatch();  // none of the batch was submitted: no peer waits for it
    throw;
  }
  return pg.closeBatch();
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::allgatherIntoTensorCoalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs) {
  return coalesce(*this, batchOpen(), "allgather_into_tensor_coalesced", outputs.size(), inputs.size(),
                  [&](size_t i) { return _allgather_base(outputs[i], inputs[i], c10d::AllgatherOptions()); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupGyre::reduceScatterTensorCoalesced(std::vector<at::Tensor>& outputs,
                                                                              std::vector<at::Tensor>& inputs,
                                                                              const c10d::ReduceScatterOptions& opts) {
  return coalesce(*this, batchOpen(), "reduce_scatter_tensor_coalesced", outputs.size(), inputs.size(),
                  [&](size_t i) { return _reduce_scatter_base(outputs[i], inputs[i], opts); });
}

bool ProcessGroupGyre::batchOpen() {
  std::lock_guard<std::mutex> lock(submitMu_);
  return batch_.has_value();
}

void ProcessGroupGyre::abandonBatch() {
  {
    std::lock_guard<std::mutex> lock(submitMu_);
    batch_.reset();
  }
  // The CUDA side's batch holds only what passed its checks; it is closed
  // so that the group can open the next one.
  if (cuda_) cuda_->closeBatch();
}

}  // namespace torch_gyre
