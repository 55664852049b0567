// Profiler events of the device paths (src/observe/step_events.h), for
// every executor alike: a Coll or P2p event per call from just before its
// work is enqueued until the launch of its group returns (the RunScope of
// launchDeviceCalls), and for each kernel a KernelLaunch event around the
// launch call and KernelCh events that end once the kernel has finished on
// its stream. Calls captured into CUDA graphs get none of these: their work
// runs at each replay, which gyre does not see.
// Without a profiler each path pays one test of a flag per call.
#pragma once

#include <cstdint>

#include "src/device/device_comm.h"
#include "src/device/runtime/runtime.h"
#include "src/observe/step_events.h"

namespace gyre {

// The `algo` of the Coll events of the paths other than the kernels (whose
// cached lanes do not keep the plan's name: "unknown").
constexpr const char* kOneRankCopyAlgo = "Copy";        // one rank: a device-to-device copy
constexpr const char* kDirectAlgo = "DeviceDirect";     // the direct executor (direct_calls.h)
constexpr const char* kStagedAlgo = "Staged";           // through host memory (staging.h)

// Whether `comm`'s calls in this launch are observed.
inline bool observedDeviceCalls(const DeviceComm* comm) {
  return anyProfiler && stepev::wantsDeviceEvents(comm->observer);
}

// Whether call `c` gets events: observed, and its stream is not capturing
// a CUDA graph (asked only when observed).
bool observedEagerCall(const DeviceRequest& c);

// The Coll event of collective `c` (its number `seq`, the path's `algo`
// name and protocol, `nChannels` lanes or kernels) or the P2p event of a
// send or receive. Null when `c` is not observed or the plugin keeps none.
void* startDeviceCallEvent(const DeviceRequest& c, uint64_t seq, int nChannels, const char* algo,
                           const char* proto);

// One kernel launch's events: begin() before the launch call, a KernelCh
// event per lane for each call it carries (addChannels), launched() after.
class LaunchEvents {
 public:
  void begin(CommObserver* o, StreamHandle stream);
  // `callEvent`: the call's Coll event (no KernelCh events without one).
  void addChannels(CommObserver* o, void* callEvent, const int* channels, int n);
  // After the launch call: on `stream` when the kernel was launched (the
  // KernelCh events end from a host function queued after it), else
  // (null) they end now.
  void launched(StreamHandle stream);

 private:
  bool active_ = false;
  void* launchEvent_ = nullptr;
  stepev::KernelChannels* channels_ = nullptr;
};

}  // namespace gyre
