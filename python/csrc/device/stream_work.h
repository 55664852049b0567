// One CUDA operation of a process group in stream order, as torch's own
// nccl backend orders its work:
//
// - launch() records an event on the caller's stream (torch's current
//   stream) and makes the group's stream wait for it, so the operation reads
//   its inputs only after the work the caller enqueued before it; then it
//   enqueues the gyre calls on the group's stream and records an end event;
// - blockStream(s) makes stream `s` wait for the end (what Work.wait() does:
//   the host does not block);
// - isCompleted() asks the end event, without blocking;
// - synchronize() blocks the host until the end, with a deadline;
// - what the operation reads and writes is held (hold()) until its end has
//   been seen, or until the StreamWork goes, whichever is later.
//
// Every query also checks the communicator for gyre's asynchronous error, so
// a dead peer or a failed kernel surfaces as a DeviceError naming the rank
// instead of as a wait that never ends.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "device_comm.h"

namespace torch_gyre::device {

class StreamWork {
 public:
  // Enqueues `calls` (gyre calls on `comm` and the stream it is given) after
  // the work already on `caller`. Errors from `calls` (DeviceComm::raise)
  // propagate; the events are released either way. The work keeps `comm`
  // alive: a Work may outlive its process group.
  static std::shared_ptr<StreamWork> launch(const std::shared_ptr<DeviceComm>& comm, int device, Stream caller,
                                            std::string what,
                                            const std::function<void(ncclComm_t, Stream)>& calls);
  ~StreamWork();
  StreamWork(const StreamWork&) = delete;
  StreamWork& operator=(const StreamWork&) = delete;

  // Keeps `thing` (a tensor's storage) alive until the end is seen.
  void hold(std::shared_ptr<void> thing);
  const std::string& what() const { return what_; }

  bool isCompleted();
  void blockStream(Stream s);
  // Waits on the host, polling the end event and gyre's asynchronous error,
  // for at most `timeout` (zero or negative: gyre's longest).
  void synchronize(std::chrono::milliseconds timeout);

 private:
  StreamWork(std::shared_ptr<DeviceComm> comm, std::string what) : comm_(std::move(comm)), what_(std::move(what)) {}
  void finished();  // under mu_

  std::shared_ptr<DeviceComm> comm_;
  std::string what_;
  std::mutex mu_;
  Event end_ = nullptr;
  bool done_ = false;
  std::vector<std::shared_ptr<void>> held_;
};

}  // namespace torch_gyre::device
