// The last piece of a communicator's work on each stream it used, as one
// event per stream (re-recorded by every call): what destroy waits for, and
// where a kernel's sticky CUDA error shows (its status block never does).
// Shared by the kernel and direct executors.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

// Makes `waiter` wait for all work issued so far on `signaler` (a fresh
// event, released once the work it marks completes).
ncclResult_t joinStreams(StreamHandle signaler, StreamHandle waiter);

// Joins every stream of `streams` but `driver` into it (intoDriver), or it
// into them.
ncclResult_t joinOthers(const std::vector<StreamHandle>& streams, StreamHandle driver, bool intoDriver);

// Neither records nor waits on a stream that is being captured into a graph.
class StreamCompletions {
 public:
  // Records the stream's work so far (its event made on first use).
  ncclResult_t note(StreamHandle stream);
  // Makes `stream` wait for the work noted last, when that was on another
  // stream. A communicator's kernels share its connections, so they must
  // run one at a time in call order whatever streams the calls name, as
  // NCCL orders a communicator's launches.
  ncclResult_t followLast(StreamHandle stream);
  // Waits up to `seconds` for every stream's recorded work; an event that
  // cannot be queried counts as done (a broken context runs nothing more).
  bool waitAll(double seconds);
  // Whether some event query fails with a sticky error (contextBroken),
  // whose text is then lastErrorText(); other refusals are no fault.
  bool anyFailed();
  void destroy();

 private:
  std::mutex mutex_;
  std::vector<std::pair<StreamHandle, EventHandle>> events_;
  int last_ = -1;  // index in events_ of the stream noted last
};

}  // namespace gyre
