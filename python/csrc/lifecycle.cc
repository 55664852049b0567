// Closing a process group: at its destruction, and by torch 2.x's abort()
// and shutdown() (the hooks in compat.h).
#include <c10/util/Logging.h>

#include "gil.h"
#include "process_group.h"

namespace torch_gyre {

void ProcessGroupGyre::abortNow() { close(/*abort=*/true); }

void ProcessGroupGyre::shutdownNow() { close(/*abort=*/false); }

void ProcessGroupGyre::close(bool abort) {
  {
    std::lock_guard<std::mutex> lock(submitMu_);
    if (closedBy_ == nullptr) closedBy_ = abort ? "abort" : "shutdown";
    batch_.reset();  // ops of an unfinished batch were never submitted
  }
  if (abort && comm_) {
    comm_->markBroken();  // released with ncclCommAbort, not a destroy that waits for peers
    ledger_->cancel();
    // Wakes the worker from the gyre call it is blocked in (and fails the
    // ones after it), so joining it below does not wait for the peers.
    ncclResult_t r = ncclCommRevoke(comm_->get(), NCCL_REVOKE_DEFAULT);
    if (r != ncclSuccess) LOG(WARNING) << "gyre backend: ncclCommRevoke: " << ncclGetLastError(comm_->get());
  }
  if (cuda_) {
    if (abort) {
      cuda_->abort();
    } else {
      cuda_->shutdown();
    }
  }
  withoutGil([this] {
    // Runs (or, revoked, fails) what is queued and joins the worker, which
    // also waits for a waiting thread that runs an operation itself: a
    // waiter may still hold the queue after this, but no longer runs calls
    // on the communicator.
    if (queue_) queue_->stop();
    queue_.reset();
    comm_.reset();
  });
}

}  // namespace torch_gyre
