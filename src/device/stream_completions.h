// The last piece of a communicator's work on each stream it used, as one
// event per stream (re-recorded by every call): what destroy waits for, and
// where a kernel's sticky CUDA error shows (its status block never does).
// Shared by the kernel and direct executors.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

#include "include/gyre.h"
#include "src/device/runtime.h"

namespace gyre {

class StreamCompletions {
 public:
  // Records the stream's work so far (its event made on first use).
  ncclResult_t note(StreamHandle stream);
  // Waits up to `seconds` for every stream's recorded work; an event that
  // cannot be queried counts as done (a broken context runs nothing more).
  bool waitAll(double seconds);
  // Whether some event query fails: the context holds a sticky error, whose
  // text is then lastErrorText().
  bool anyFailed();
  void destroy();

 private:
  std::mutex mutex_;
  std::vector<std::pair<StreamHandle, EventHandle>> events_;
};

}  // namespace gyre
