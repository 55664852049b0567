// A gyre host-memory communicator made for one process group: the unique id
// travels through the c10d::Store the group was created with, and the
// group's timeout becomes gyre's.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include <gyre.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace torch_gyre {

// Throws std::runtime_error (RuntimeError in Python) carrying gyre's own
// message (ncclGetLastError) when `r` is not ncclSuccess.
void check(ncclResult_t r, const char* call, ncclComm_t comm);

// A group's unique id under store key `key`: rank 0 makes and publishes it,
// the others wait for it with the store's timeout (an error naming the key
// and rank 0 when it does not come).
ncclUniqueId exchangeUniqueId(const c10::intrusive_ptr<c10d::Store>& store, int rank, const char* key);

class Communicator {
 public:
  // Collective over the group: rank 0 makes the id and publishes it; the
  // others wait for it with the store's timeout.
  Communicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               std::chrono::milliseconds timeout);
  // Takes over `comm` (split from another group's), with the group's timeout.
  Communicator(ncclComm_t comm, std::chrono::milliseconds timeout);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t get() const { return comm_; }
  // After a failure the peers may be gone: destruction then aborts instead
  // of waiting for them.
  void markBroken() { broken_.store(true); }

 private:
  ncclComm_t comm_ = nullptr;
  std::atomic<bool> broken_{false};  // set by whichever thread ran the failing call
};

}  // namespace torch_gyre
