// What gyre shows of itself while it runs: per-communicator counters
// (call_counters.h), NVTX ranges (nvtx_ranges.h) and events for an NCCL
// profiler plugin (profiler_plugin.h). The communicator owns one
// CommObserver; the API layer reports each call through the hooks below,
// the host executor's caller reports the path each collective took. Nothing
// here calls back into the communicator.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "src/bootstrap/wire.h"
#include "src/call/call.h"
#include "src/observe/call_counters.h"
#include "src/observe/step_events.h"

namespace gyre {

struct CommObserver {
  CommCounters counters;
  // Set by startObserving once the rendezvous is done (0 / -1 before).
  uint64_t commId = 0;  // same on every rank, derived from the session secret (which it does not reveal)
  // The session secret, kept for the status endpoint's challenges
  // (status_auth.h): it checks a client's proof and is never sent.
  uint64_t secret = 0;
  int rank = -1;
  int nranks = 0;
  int nNodes = 0;
  bool isHost = false;
  std::vector<int> peerPids;           // by rank, for the status tool to name a rank that does not answer
  std::vector<std::string> peerHosts;  // by rank
  // Per collective: how the last planned call ran; a repeated call
  // (src/host/repeat_call.h) reuses that call's plan.
  struct Planned {
    ExecPath path = ExecPath::Ring;
    const char* algorithm = "";
    const char* protocol = "";
    int nchannels = 0;
    uint64_t bytes = 0;  // a repeat has the same count and datatype
  } lastPlanned[kApiFuncs];
  // The profiler plugin's context for this communicator and the events it
  // asked for (mask 0: no plugin, or its init failed).
  bool profiled = false;
  void* profilerContext = nullptr;
  int profilerMask = 0;
  // Live state for the status socket (status_server.h): the API function
  // in progress (ApiFunc + 1; kLiveGroupEnd; 0 idle), how many calls and
  // group ends have begun, and the tick count when the current one began.
  std::atomic<uint8_t> liveFunc{0};
  std::atomic<uint64_t> liveSeq{0};
  std::atomic<uint64_t> liveSince{0};
};
constexpr uint8_t kLiveGroupEnd = 0xff;

// After init: records who this communicator is and starts the profiler
// plugin for it (loading the plugin on first use).
void startObserving(CommObserver* o, uint64_t secret, const std::vector<PeerInfo>& peers, int rank, bool isHost);
// At destroy: logs the counters (NCCL_DEBUG=INFO, subsystem COLL) and
// finalizes the profiler context.
void stopObserving(CommObserver* o);

// A 64-bit id for a communicator that every rank computes alike and that
// does not give away the secret it comes from.
uint64_t commIdOf(uint64_t secret);

// One API call (after its arguments were checked), for its whole duration:
// counts it, times it (outside groups), opens its NVTX range and profiler
// API events. `groupDepth`: open ncclGroupStart calls on this thread;
// `graphCaptured`: the call's stream is capturing a CUDA graph (asked by the
// caller only where `o` has a profiler), which its API event and a group
// API event it starts report.
class ApiCallScope {
 public:
  ApiCallScope(CommObserver& o, const CollCall& call, int groupDepth, bool graphCaptured = false);
  ~ApiCallScope();
  ApiCallScope(const ApiCallScope&) = delete;
  ApiCallScope& operator=(const ApiCallScope&) = delete;

 private:
  ApiCallScope(CommObserver& o, const CollCall& call, int groupDepth, bool graphCaptured, ApiFunc f);
  CommObserver& o_;
  CallCounters& counters_;
  uint64_t start_ = 0;
  bool lone_;
  bool nvtx_ = false;
  void* apiEvent_ = nullptr;
  void* groupEvent_ = nullptr;  // a lone call's own group API event
};

// ncclGroupStart: the outermost one opens the group's NVTX range.
void observeGroupStart(int depthAfter);

// The outermost ncclGroupEnd (or ncclGroupSimulateEnd), for its duration:
// times the group for each communicator with work in it, closes its NVTX
// range and the group's profiler API event.
class GroupEndScope {
 public:
  GroupEndScope();
  ~GroupEndScope();
  void add(CommObserver& o);
  GroupEndScope(const GroupEndScope&) = delete;
  GroupEndScope& operator=(const GroupEndScope&) = delete;

 private:
  uint64_t start_;
  std::vector<CommObserver*> comms_;
  bool nvtx_ = false;
};

// The host executor is about to run `call` on `path` (`nchannels`: the
// plan's ring channels; the protocol's name; `seq`: the collective's
// sequence number, 0 for send/recv): counts the path and starts the call's
// profiler event, which ends with the enclosing HostRunScope. A repeat of
// the last call (observeRepeatedCall) takes that call's plan.
void observeHostCall(CommObserver& o, const CollCall& call, ExecPath path, const char* protocol, int nchannels,
                     uint64_t seq);
void observeRepeatedCall(CommObserver& o, const CollCall& call, uint64_t seq);

// One run of the host executor: profiler events started in it stop when it
// returns (children first). The same scope as a device launch's (step_events.h).
using HostRunScope = RunScope;

}  // namespace gyre
