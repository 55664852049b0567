// Profiler events for the executors' steps, in place of NCCL's proxy
// operations and steps: a ProxyOp event per connection a lane uses, in each
// direction (its channel id is the lane's channel, its peer the
// connection's), and a ProxyStep event per chunk the lane sends or receives
// on it, parented to the call's Coll or P2p event. The executors (src/host,
// src/device) include this header only: the values they pass are plain.
//
// Cost without a plugin: anyProfiler stays false, and the executors test it
// (or a pointer it would have set) once per run and once per step.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre {

struct CommObserver;

// Set once some communicator of the process has a profiler plugin that
// asked for events; never reset.
extern bool anyProfiler;

namespace stepev {

// Whether `o` (may be null) has a plugin asking for ProxyOp or ProxyStep
// events and an executor run is being observed on this thread.
bool wantsSteps(const CommObserver* o);

// The event a lane's ProxyOps hang under: for a collective the run's Coll
// event with sequence number `seq`, for send/recv the run's first P2p event
// to or from `peer` in that direction. Null when there is none (the call is
// not observed), and then the lane reports nothing.
void* laneParent(CommObserver* o, bool p2p, uint64_t seq, int peer, bool isSend);

// A ProxyOp: `nSteps` chunks of at most `chunkBytes` over one connection.
// Null when the plugin keeps none (then its steps are not reported either).
void* startOp(CommObserver* o, void* parent, int channel, int peer, bool isSend, int nSteps, int chunkBytes);
void stopOp(void* op);

// A ProxyStep, number `step` (from 0) of its ProxyOp: started when the lane
// reaches the step (it may still wait for data or buffer space), ended when
// the chunk of `bytes` has been sent or consumed.
void* startStep(CommObserver* o, void* op, int step, bool isSend);
void endStep(void* step, bool isSend, size_t bytes);

}  // namespace stepev
}  // namespace gyre
