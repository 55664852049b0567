// From validated calls to execution. A call outside a group is a group of
// one. ncclGroupEnd checks every pending call (possibly on several
// communicators) and hands them to their communicators' executor, which
// lowers them (src/lower) into lanes — one per channel of a collective, one
// per send or receive — and runs them together.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "include/gyre.h"
#include "src/call/call.h"

namespace gyre {

// One call as the user made it (after argument checks), on its communicator.
// Layers below the communicator take the CollCall part only.
struct PendingCall : CollCall {
  ncclComm* comm = nullptr;
};

// Runs the call on `comm` now, or queues it if a group is open on this
// thread. A PreMulSum operator's scalar is looked up here, so what runs
// later does not depend on the operator still existing.
ncclResult_t enqueue(ncclComm* comm, const CollCall& call);


ncclResult_t groupStart();
// How many ncclGroupStart calls are open on this thread.
int groupDepth();
ncclResult_t groupEnd();
// Collective set-up calls (window registration, device communicators) on
// `comm`: `task` runs now, or — inside a group — at the outermost
// ncclGroupEnd, where each communicator's tasks run in their order on a
// thread of its own, all communicators at once, so one thread can set up
// several ranks that must meet (as NCCL lets such calls be grouped). Its
// results are written then.
ncclResult_t runOrDefer(ncclComm* comm, std::function<ncclResult_t()> task);

// Ends the group like groupEnd but hands back its calls instead of running
// them (empty while an outer group stays open).
ncclResult_t groupSimulateEnd(std::vector<PendingCall>* calls);

}  // namespace gyre
