// Profiler events for what the executors do. The host executor's steps, in
// place of NCCL's proxy operations and steps: a ProxyOp event per
// connection a lane uses, in each direction (its channel id is the lane's
// channel, its peer the connection's), and a ProxyStep event per chunk the
// lane sends or receives on it, parented to the call's Coll or P2p event.
// The device paths, as far as the host side knows them: a Coll or P2p
// event per call until it is enqueued, and for a kernel a KernelLaunch
// event per launch and a KernelCh event per lane (or block group) of each
// call it carries, from the launch until a host function queued after the
// kernel on its stream runs. The executors (src/host, src/device)
// include this header only: what they pass is plain values and CollCall.
//
// Cost without a plugin: anyProfiler stays false, and the executors test it
// (or a pointer it would have set) once per run and once per step.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "src/call/call.h"

namespace gyre {

struct CommObserver;

// Set once some communicator of the process has a profiler plugin that
// asked for events; never reset. Atomic: communicators of one process
// (ncclCommInitAll) set it from their own threads while others read it.
extern std::atomic<bool> anyProfiler;

// One run of an executor (the host executor's lanes, or a device launch):
// profiler events started in it for its calls stop when it ends, children
// first. Inline and empty until some communicator has a profiler.
class RunScope {
 public:
  RunScope() : active_(anyProfiler) {
    if (active_) begin();
  }
  ~RunScope() {
    if (active_) end();
  }
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  void begin();
  void end();
  bool active_;
  size_t firstEvent_ = 0;
};

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

// Device calls. Whether `o` (may be null) has a plugin asking for Group,
// Coll, P2p, KernelLaunch or KernelCh events and a run is being observed.
bool wantsDeviceEvents(const CommObserver* o);
// Around the launch call itself; parent: the calling group's API event.
void* startKernelLaunch(CommObserver* o, void* stream);
void stopKernelLaunch(void* launch);
// A device call's Coll event (a collective; `seq` its number, `algo` the
// path's name) or P2p event (a send or receive), under the run's Group
// event and stopped when the run ends, as NCCL stops it once the call is
// enqueued. Null when the plugin keeps none.
void* startDeviceCall(CommObserver* o, const CollCall& call, uint64_t seq, int nChannels, const char* algo,
                      const char* proto);
// The KernelCh events of the lanes of the kernel's calls, started at
// launch (`channels`: each lane's channel; `parent`: its call's Coll
// event). `pending` (null for the first call of a launch) gathers them
// for kernelDone.
struct KernelChannels;
KernelChannels* startKernelChannels(CommObserver* o, void* parent, const int* channels, int n,
                                    KernelChannels* pending);
// A host function for the kernel's stream: the kernel has finished; each
// KernelCh event records ncclProfilerKernelChStop and stops. Also what a
// launch that failed, or whose host function could not be queued, calls.
void kernelDone(void* pending);

}  // namespace stepev
}  // namespace gyre
