// The device communicator of one process group: gyre's ncclComm_t on the
// group's CUDA device, and the stream of its own on which the group's CUDA
// operations run (stream_work.h orders it against the caller's stream).
//
// One per group and process. It binds to one device, the first one used (or
// the one passed to bind() at the group's creation, torch's device_id), and
// refuses tensors on any other: a process drives one GPU per group, as with
// torch's own nccl backend. Independent of torch: only gyre's public API and
// StreamOps.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <gyre.h>

#include "stream_ops.h"

namespace torch_gyre::device {

// An error of the device path; its text names the rank (and the device once
// the group has one), so a job's logs say which process failed.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DeviceComm {
 public:
  // Makes or fetches the group's unique id (rank 0 makes it): collective,
  // called once, when the communicator is made.
  using IdExchange = std::function<ncclUniqueId()>;

  DeviceComm(StreamOps& ops, int rank, int size, double timeoutSeconds, IdExchange exchange);
  ~DeviceComm();
  DeviceComm(const DeviceComm&) = delete;
  DeviceComm& operator=(const DeviceComm&) = delete;

  // The communicator on `device`, made by the first call (a collective
  // over the group: every rank's first CUDA operation of the group, or
  // bind(), must reach it). `what` names the operation in errors: another
  // device than the group's, a closed or failed communicator.
  ncclComm_t on(int device, const char* what);
  // Makes the communicator now (torch's eager init with device_id).
  void bind(int device) { on(device, "device_id"); }
  bool bound() const;
  int device() const;  // -1 until bound
  // The stream the group's device operations run on; valid once bound.
  Stream stream() const { return stream_; }
  StreamOps& ops() const { return ops_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // The members of `color` (ranks ordered by `key`) as a new group with a
  // communicator split from this one (ncclCommSplit), on the same device:
  // collective over this group, every rank calls it, non-members with
  // NCCL_SPLIT_NOCOLOR, for whom it returns nullptr. Binds this group first
  // when it is not yet bound, on `device`.
  std::unique_ptr<DeviceComm> split(int device, int color, int key, double timeoutSeconds);

  // Throws DeviceError when gyre reported an asynchronous error on the
  // communicator (a peer that died or stopped answering, a failed kernel):
  // the communicator is then broken, and every later call fails the same way.
  void checkAsync(const char* what);
  // Throws DeviceError naming the rank, `call`, gyre's reason and its last
  // error text; unless the error is the caller's (an invalid argument or
  // usage), the communicator is broken from then on.
  [[noreturn]] void raise(ncclResult_t r, const char* call);
  void check(ncclResult_t r, const char* call) {
    if (r != ncclSuccess) raise(r, call);
  }

  // Stops at once: operations in flight fail, the communicator is
  // aborted (ncclCommAbort), and every later call raises naming abort().
  void abort();
  // Releases the communicator after the work already enqueued (ncclCommDestroy);
  // later calls raise naming shutdown().
  void shutdown();

 private:
  DeviceComm(StreamOps& ops, int rank, int size, ncclComm_t comm, int device, double timeoutSeconds);
  std::string who() const;  // "rank R of N on cuda:D"
  void makeStream();
  void release(bool abort);

  StreamOps& ops_;
  const int rank_, size_;
  const double timeoutSeconds_;
  IdExchange exchange_;
  mutable std::mutex mu_;
  ncclComm_t comm_ = nullptr;
  int device_ = -1;
  Stream stream_ = nullptr;
  const char* closedBy_ = nullptr;  // "abort" or "shutdown"
  std::string brokenBy_;            // the first error that broke the communicator
};

// gyre's collective timeout (seconds) from a group's timeout: torch's "no
// timeout" (0 or negative) and anything longer become gyre's longest.
double gyreTimeoutSeconds(double groupSeconds);

}  // namespace torch_gyre::device
