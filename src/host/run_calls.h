// The host executor's entry: calls on host memory, lowered (src/lower) over
// their communicators' connections into lanes and run together to completion.
// Host communicators run every call here; device communicators run their
// staged pieces here (src/device/staged/staging.cc).
#pragma once

#include <vector>

#include "include/gyre.h"
#include "src/call/call.h"
#include "src/host/host_comm.h"

namespace gyre {

// One call on a communicator's host view.
struct HostCall : CollCall {
  HostComm* comm = nullptr;
};

// Plans, lowers and runs `calls`: sends to self are copied, send/recv
// connections made on first use, collectives of one communicator run in call
// order and sends and receives in order per connection. The caller has
// checked that the communicators are usable.
ncclResult_t runHostCalls(const std::vector<HostCall>& calls);

// Whether `call`, alone, repeats this thread's previous lone call (repeat_call.h),
// and runs it so: the previous lanes restarted on this call's buffers.
bool repeatsLastCall(const CollCall& call, const HostComm& comm);
ncclResult_t rerunLastCall(const CollCall& call, HostComm* comm);

}  // namespace gyre
