// The device layer's view of a device communicator, and the state it owns for
// it. The communicator (src/comm) makes one at init, fills in the values
// below as set-up learns them, and hands its calls down as DeviceRequests;
// the device layer never sees ncclComm. What only the communicator can do
// (fail itself, build a call's lanes over its connections, run calls on the
// host executor) it asks through DeviceCommHooks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/call/call.h"
#include "src/device/peer_windows.h"
#include "src/sched/lane_spec.h"

namespace gyre {

class Bootstrap;
struct Connection;
struct CopyState;
struct CommObserver;  // src/observe/observer.h
struct DeviceComm;
struct DirectState;
struct KernelState;
struct StagingState;

// One call on a device communicator.
struct DeviceRequest : CollCall {
  DeviceComm* comm = nullptr;
};

class DeviceCommHooks {
 public:
  virtual ~DeviceCommHooks() = default;
  // Fails the communicator with `code`, telling its peers to blame `culprit`
  // (-1: nobody in particular).
  virtual void markFailed(ncclResult_t code, int culprit) = 0;
  // Makes ncclCommGetAsyncError report `code` and `why`, unless the
  // communicator already holds an error; tells no peer.
  virtual void noteAsyncError(ncclResult_t code, const std::string& why) = 0;
  // The lanes a collective runs as: the planner's schedules over the
  // communicator's connections (valid until the next call on this thread);
  // *ll: the plan picked the LL protocol.
  virtual ncclResult_t laneSpecs(const CollCall& call, std::vector<LaneSpec>* out, bool* ll) = 0;
  // Runs `calls` (of this and other device communicators, each request's
  // buffers in host memory) on the host executor, to completion.
  virtual ncclResult_t runOnHost(const std::vector<DeviceRequest>& calls) = 0;
};

struct DeviceComm {
  // Out of line, with the destructor: the states are complete types only there.
  DeviceComm(std::atomic<bool>& abort, std::atomic<int>& error, uint64_t& ops);
  ~DeviceComm();

  int rank = 0;
  int nranks = 1;
  int cudaDev = -1;
  double collTimeoutSeconds = 300;  // GYRE_TIMEOUT
  std::atomic<bool>& abortFlag;     // the communicator's (ncclCommAbort)
  std::atomic<int>& asyncError;     // the communicator's (ncclCommGetAsyncError)
  uint64_t& opCount;                // the communicator's collective sequence number
  Bootstrap* bootstrap = nullptr;   // peers' facts and set-up exchanges
  CommObserver* observer = nullptr; // the communicator's, for its kernels' profiler events
  std::unique_ptr<DeviceCommHooks> hooks;
  // The connections made at init (rings, trees, doubling), once they exist:
  // the kernel watchdog watches the p2p ones.
  std::vector<Connection*> initConnections;

  // Which executor runs collectives (chooseDeviceExecutor, setupDirect);
  // what neither takes is staged. Send/recv: copy_calls.h.
  bool deviceKernels = false;
  std::unique_ptr<KernelState> kernels;    // kernel_calls.h
  std::unique_ptr<DirectState> direct;     // direct_calls.h
  std::unique_ptr<StagingState> staging;   // staging.h
  std::unique_ptr<CopyState> copies;       // copy/copy_calls.h
  // The registered windows and every peer's mapping of them (filled by
  // ncclCommWindowRegister): a call on a registered buffer finds its peers'
  // buffers here instead of exchanging handles.
  PeerWindows windows;
};

}  // namespace gyre
