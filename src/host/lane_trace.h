// A lane's steps as profiler events (src/observe/step_events.h): one
// ProxyOp per connection the lane uses in each direction, one ProxyStep per
// chunk it sends or receives there. The executor gives a lane a LaneTrace
// only while a profiler plugin asks for these events (LaneTraces, for one
// run of runLanes); a lane without one pays a null test per step.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "src/observe/step_events.h"
#include "src/sched/lane_spec.h"

namespace gyre {

struct CommObserver;
class Lane;

class LaneTrace {
 public:
  // Starts the lane's ProxyOp events under its call's event; false (and
  // nothing started) when the call has no event to hang them under.
  bool open(const LaneSpec& spec, CommObserver* observer);
  // The lane is at step `next` (== nsteps: done): the step events of the
  // step it was at end, step `next`'s begin. Repeated calls with the same
  // step (a lane still waiting) do nothing.
  void reached(size_t next) {
    if (next != at_) move(next);
  }
  // Ends whatever is still open (a run that failed midway).
  void close();

 private:
  struct Op {
    void* handle = nullptr;
    int steps = 0;    // chunks over this connection in this direction
    int started = 0;  // of those, begun so far
  };
  struct Open {
    Op* op;
    void* step;
    bool isSend;
  };
  void move(size_t next);
  void begin(Op& op, bool isSend);
  size_t bytesOf(size_t step) const;

  const LaneSpec* spec_ = nullptr;
  CommObserver* observer_ = nullptr;
  size_t at_ = 0;  // the step the lane is at
  bool begun_ = false;  // whether step at_'s events were begun
  std::vector<Op> sendOps_, recvOps_;  // by connection index
  std::vector<Open> open_;
};

// The traces of one run of runLanes: attached to its lanes at the start
// (when some plugin asks for step events), closed and detached at the end.
class LaneTraces {
 public:
  explicit LaneTraces(std::vector<std::unique_ptr<Lane>>& lanes) : lanes_(lanes) {
    if (anyProfiler) attach();
  }
  ~LaneTraces() {
    if (attached_) detach();
  }
  LaneTraces(const LaneTraces&) = delete;
  LaneTraces& operator=(const LaneTraces&) = delete;

 private:
  void attach();
  void detach();
  std::vector<std::unique_ptr<Lane>>& lanes_;
  bool attached_ = false;
};

}  // namespace gyre
