// The device layer's view of a device communicator, and the state it owns for
// it. The communicator (src/comm) makes one at init, fills in the values
// below as set-up learns them, and hands its calls down as DeviceRequests;
// the device layer never sees ncclComm. The kernel path lowers calls over the
// communicator's wiring (src/lower); the staged path runs its pieces on the
// communicator's host view (src/host/run_calls.h), which also holds the
// error state every path sets when a call fails.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/call/call.h"
#include "src/device/peer_windows.h"
#include "src/host/host_comm.h"
#include "src/sched/lane_spec.h"

namespace gyre {

class Bootstrap;
struct Connection;
struct CopyState;
struct CommObserver;  // src/observe/observer.h
struct DeviceComm;
struct DirectState;
struct KernelState;
class SpinWatch;
struct StagingState;

// One call on a device communicator.
struct DeviceRequest : CollCall {
  DeviceComm* comm = nullptr;
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
  Wiring* wiring = nullptr;        // the communicator's connections, lowered over (src/lower)
  HostComm* host = nullptr;        // its host view: staged pieces run there; markFailed, noteAsyncError
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
  // What ncclWaitSignal's kernels watch (signal_waits.h).
  std::unique_ptr<SpinWatch> signalWatch;
};

}  // namespace gyre
