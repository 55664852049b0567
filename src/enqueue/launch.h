// Dispatching a batch of checked calls to the executor of their
// communicators: the host executor (src/host/run_calls.h) for host
// communicators, the device layer (src/device/device_layer.h) for device ones.
#pragma once

#include <vector>

#include "src/enqueue/enqueue.h"

namespace gyre {

// Runs the calls: on the host executor now for host communicators, staged
// on their streams for device communicators (src/device/staged/staging.h).
ncclResult_t launchCalls(std::vector<PendingCall>& calls);
// launchCalls of one call outside a group; a host collective that repeats
// the thread's previous call (repeat_call.h) goes straight to its lanes.
ncclResult_t launchLoneCall(const PendingCall& call);

// Records an argument error raised while a group is open (see group.cc).
void noteGroupError(ncclResult_t r);

}  // namespace gyre
