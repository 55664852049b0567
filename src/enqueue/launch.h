// Turning a batch of calls into lanes and running them.
#pragma once

#include <vector>

#include "src/enqueue/enqueue.h"
#include "src/sched/lane_spec.h"

namespace gyre {

// Runs the calls: on the host executor now for host communicators, staged
// on their streams for device communicators (src/device/staging.h).
ncclResult_t launchCalls(std::vector<PendingCall>& calls);
// launchCalls of one call outside a group; a host collective that repeats
// the thread's previous call (repeat_call.h) goes straight to its lanes.
ncclResult_t launchLoneCall(const PendingCall& call);

// The host executor path itself (also what a staged job runs on its buffers).
ncclResult_t runHostCalls(std::vector<PendingCall>& calls);

// The lanes one collective runs as (schedules and connections), without
// making host lanes: what the device executor uploads. The specs' step
// arrays stay valid until the next call on this thread.
// *ll: the plan picked the LL protocol.
ncclResult_t collectiveLaneSpecs(const PendingCall& call, std::vector<LaneSpec>* out, bool* ll);

// Records an argument error raised while a group is open (see group.cc).
void noteGroupError(ncclResult_t r);

}  // namespace gyre
