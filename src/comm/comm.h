// The communicator: what init built (bootstrap, channels and their
// connections) and the state collectives share (abort flag, error state,
// sequence number). Lifecycle in comm_init.cc / comm_destroy.cc.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "include/gyre.h"
#include "src/debug/fork_guard.h"
#include "src/bootstrap/bootstrap.h"
#include "src/comm/comm_topology.h"
#include "src/plan/tuner_plugin.h"
#include "src/observe/observer.h"
#include "src/lower/wiring.h"
#include "src/sched/step.h"
#include "src/transport/transport.h"

namespace gyre {

struct DeviceComm;  // src/device/device_comm.h: the device layer's view and state
struct WindowRecord;  // src/comm/window.h: a registered window
struct SignalArea;    // src/comm/window.h: one-sided signal slots
struct HostComm;    // src/host/host_comm.h: the host executor's view

// A reduction operator made by ncclRedOpCreatePreMulSum: sum after
// multiplying every input by a scalar of the op's datatype.
struct CustomRedOp {
  bool inUse = false;
  ncclDataType_t datatype = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  const void* scalarPtr = nullptr;  // ncclScalarDevice: read when each collective starts
  unsigned char value[8] = {};      // ncclScalarHostImmediate: copied at creation
};

constexpr uint64_t kCommMagic = 0x6779726563306d6dull;  // "gyrec0mm"

}  // namespace gyre

struct ncclComm : gyre::Wiring {
  ncclComm();
  ~ncclComm();
  uint64_t magic = gyre::kCommMagic;
  // A forked child may not use gyre while this communicator lives (fork_guard.h).
  gyre::ForkHazard forkHazard;
  // Unique in this process for its lifetime (never reused, unlike the
  // address): the repeated-call cache (src/host/repeat_call.h) keys on it.
  const uint64_t serial;
  bool isHost = false;
  int cudaDev = -1;
  double collTimeoutSeconds = 300;

  std::unique_ptr<gyre::Bootstrap> bootstrap;
  std::unique_ptr<gyre::CommTopology> topology;  // placement, rings and tuning from init
  // The tuner plugin's context for this communicator (Wiring::tuner points
  // at it): opened at the end of init, closed at destroy and abort.
  std::unique_ptr<gyre::TunerSession> tunerSession;
  // The executors' views of this communicator (src/comm/executor_binding.h):
  // the host executor's, always (device communicators stage through it too),
  // and the device layer's, which also holds its state (kernels, direct
  // path, staging), for device communicators only.
  std::unique_ptr<gyre::HostComm> host;
  std::unique_ptr<gyre::DeviceComm> device;
  // In-place host AlltoAll sends from a copy of the buffer. Kept between
  // calls (grow-only, freed with the communicator): a fresh allocation of tens
  // of MiB is mmap'd and faulted in on every call, which cost 30x here.
  std::vector<char> alltoallCopy;

  std::atomic<bool> abortFlag{false};
  std::atomic<int> asyncError{ncclSuccess};
  std::atomic<int> activeCalls{0};
  std::thread initThread;     // nonblocking init (config.blocking = 0) runs here
  std::atomic<bool> finalized{false};  // ncclCommFinalize ran: no new calls
  std::string errorText;      // why asyncError was set (guarded by errorMutex)
  std::mutex errorMutex;

  std::mutex registrationMutex;  // ncclCommRegister / ncclCommWindowRegister records (api_memory.cc)
  std::set<void*> registrations;
  std::map<ncclWindow_t, gyre::WindowRecord*> windows;  // by handle (window.h)
  uint64_t windowSerial = 0;               // windows registered so far (every rank counts alike)
  gyre::SignalArea* signals = nullptr;     // made with the first window of a device communicator
  int shrinkCount = 0;           // ncclCommShrink calls, to keep their rendezvous apart

  // ncclCommSuspend / ncclCommResume (api_suspend.cc): no calls while set.
  std::atomic<bool> suspended{false};
  // ncclCommGetUniqueId's id for the next ncclCommGrow (api_grow.cc), until
  // a grow consumes it.
  std::mutex growMutex;
  bool growIdPending = false;
  ncclUniqueId growId{};

  uint64_t opCount = 0;       // collectives issued; checked against peers' step metadata
  gyre::CommObserver observer;  // counters, NVTX and profiler plugin state (src/observe)
  std::vector<gyre::CustomRedOp> customOps;  // op value = ncclNumOps + index
};

namespace gyre {

// Puts the communicator into the error state after a collective failed:
// records the error for ncclCommGetAsyncError and tells the peers which rank
// is to blame, so every rank's error names the same culprit.
void markCommFailed(ncclComm* comm, ncclResult_t code, int culprit);

// Closes every connection and the bootstrap; safe to call twice.
void releaseCommResources(ncclComm* comm);

// Calls fn on each connection made at init (rings, trees, doubling, mesh; not the
// send/recv ones made on first use) until it returns true; says whether one did.
template <typename Fn>
bool anyInitConnection(ncclComm* comm, Fn fn) {
  for (Channel& ch : comm->channels)
    for (auto* list : {&ch.sendPtrs, &ch.recvPtrs})
      for (Connection* c : *list)
        if (fn(c)) return true;
  for (CommTree& t : comm->trees)
    for (auto& c : t.storage)
      if (fn(c.get())) return true;
  for (auto& c : comm->doubling.storage)
    if (fn(c.get())) return true;
  for (auto& c : comm->mesh.storage)
    if (fn(c.get())) return true;
  return false;
}

// Frees what ncclCommRegister / ncclCommWindowRegister left registered.
void releaseRegistrations(ncclComm* comm);

}  // namespace gyre
