// Lowering: a call, its plan and the communicator's connections (wiring.h)
// become lanes — one schedule (src/sched) per channel of a collective, one per
// send or receive — described as LaneSpecs. Both executors call it: the host
// executor makes host lanes of the specs (src/host/lane_set.h), the device
// executor uploads them for its kernel (src/device/kernel/kernel_calls.cc).
#pragma once

#include <memory>
#include <vector>

#include "include/gyre.h"
#include "src/call/call.h"
#include "src/lower/wiring.h"
#include "src/plan/planner.h"
#include "src/sched/lane_spec.h"
#include "src/sched/step.h"

namespace gyre {

// One lane as lowering emits it, and the key its order follows: a lane runs
// after every lane of the previous call on the same key (a communicator for
// collectives, a connection for sends and receives).
struct LoweredLane {
  LaneSpec spec;
  const void* orderKey = nullptr;
};

// The lanes of one batch of calls. Kept and reused batch after batch: the
// schedules keep their step arrays, so a repeated call allocates nothing
// (small-message latency was dominated by malloc/free). A spec's steps stay
// valid until the next reset().
class LoweredBatch {
 public:
  void reset() {
    lanes_.clear();
    nschedules_ = 0;
  }
  // Storage for one lane's steps.
  ChannelSchedule* newSchedule() {
    if (nschedules_ == schedules_.size()) schedules_.push_back(std::make_unique<ChannelSchedule>());
    ChannelSchedule* s = schedules_[nschedules_++].get();
    s->steps.clear();
    return s;
  }
  void add(LaneSpec spec, const ChannelSchedule& steps, const void* orderKey) {
    spec.steps = steps.steps.data();
    spec.nsteps = steps.steps.size();
    lanes_.push_back({spec, orderKey});
  }
  const std::vector<LoweredLane>& lanes() const { return lanes_; }

 private:
  std::vector<std::unique_ptr<ChannelSchedule>> schedules_;  // pointers: specs point into their steps
  size_t nschedules_ = 0;
  std::vector<LoweredLane> lanes_;
};

// The plan of `call` over `w`.
ncclResult_t planCall(const Wiring& w, const CollCall& call, Plan* plan);

// What every lane of `call` shares. `withScalar`: copy a PreMulSum operator's
// scalar into the spec (the host executor); the device executor takes it per
// call, and an ncclScalarDevice scalar must not be read on the host.
LaneSpec baseSpec(const Wiring& w, const CollCall& call, bool withScalar = true);

// Appends the lanes of a collective, by the algorithm its plan picks.
ncclResult_t lowerCollective(const Wiring& w, const CollCall& call, const Plan& plan, LaneSpec spec,
                             LoweredBatch* out);
// Appends the lane of a send or receive to another rank; its connection
// (made first: connections for the call's peer must exist) numbers the call.
ncclResult_t lowerSendRecv(const Wiring& w, const CollCall& call, const Plan& plan, LaneSpec spec,
                           LoweredBatch* out);

// Whether the plan's single-copy choice applies to `call` (a reduction that
// scales its inputs keeps the other algorithm).
bool runsSingleCopy(const CollCall& call, const Plan& plan);

// The lanes one collective runs as, for the device executor to upload. The
// specs' step arrays stay valid until the next call on this thread.
// *ll: the plan picked the LL protocol.
ncclResult_t collectiveLaneSpecs(const Wiring& w, const CollCall& call, std::vector<LaneSpec>* out, bool* ll);

}  // namespace gyre
