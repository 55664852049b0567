#include "src/enqueue/launch.h"

#include <algorithm>
#include <mutex>

#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/device_layer.h"
#include "src/device/runtime/runtime.h"
#include "src/enqueue/arg_checks.h"
#include "src/host/host_comm.h"
#include "src/host/run_calls.h"

namespace gyre {
namespace {

// Counts calls as in flight so ncclCommAbort waits for them to leave. Taken
// before the usability check: an abort that sets its flag after the check
// waits for the call to leave.
class ActiveCalls {
 public:
  ActiveCalls(ncclComm* const* comms, size_t n) : comms_(comms), n_(n) {
    for (size_t i = 0; i < n_; ++i) comms_[i]->activeCalls.fetch_add(1);
  }
  explicit ActiveCalls(const std::vector<ncclComm*>& comms) : ActiveCalls(comms.data(), comms.size()) {}
  ~ActiveCalls() {
    for (size_t i = 0; i < n_; ++i) comms_[i]->activeCalls.fetch_sub(1);
  }

 private:
  ncclComm* const* comms_;
  size_t n_;
};

ncclResult_t checkUsable(ncclComm* comm, CollKind coll) {
  pollDeviceStatus(comm->device.get(), /*queryStreams=*/false);  // a kernel that reported a failure since the last call
  if (comm->abortFlag.load()) return fail(ncclInvalidUsage, "%s: the communicator was aborted", collName(coll));
  if (comm->finalized.load())
    return fail(ncclInvalidUsage, "%s: the communicator was finalized (ncclCommFinalize); only ncclCommDestroy "
                                  "may follow", collName(coll));
  if (comm->suspended.load())
    return fail(ncclInvalidUsage, "%s: the communicator is suspended (ncclCommSuspend); call ncclCommResume first",
                collName(coll));
  if (comm->asyncError.load() == ncclInProgress)
    return fail(ncclInvalidUsage, "%s: the communicator is still initialising (nonblocking init); wait until "
                                  "ncclCommGetAsyncError stops returning ncclInProgress", collName(coll));
  if (int err = comm->asyncError.load(); err != ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    return fail(static_cast<ncclResult_t>(err), "%s: the communicator failed earlier: %s", collName(coll),
                comm->errorText.c_str());
  }
  return ncclSuccess;
}

thread_local std::vector<ncclComm*> tlsComms;

ncclResult_t runOnHostExecutor(std::vector<PendingCall>& calls);

HostCall onHostView(const PendingCall& p) {
  HostCall h;
  static_cast<CollCall&>(h) = p;
  h.comm = p.comm->host.get();
  return h;
}

}  // namespace

ncclResult_t launchCalls(std::vector<PendingCall>& calls) {
  if (calls.empty()) return ncclSuccess;
  bool device = !calls.front().comm->isHost;
  for (const PendingCall& c : calls) {
    GYRE_CHECK(checkUsable(c.comm, c.coll));
    if (c.comm->isHost != !device)
      return fail(ncclInvalidUsage, "%s: one group mixes host-memory and device communicators", collName(c.coll));
  }
  if (!device) return runOnHostExecutor(calls);
  thread_local std::vector<DeviceRequest> requests;  // reused: a lone call allocates nothing here
  requests.clear();
  for (const PendingCall& c : calls) {
    DeviceRequest& r = requests.emplace_back();
    static_cast<CollCall&>(r) = c;
    r.comm = c.comm->device.get();
  }
  GYRE_CHECK(launchDeviceCalls(requests));
  if (DeviceRuntime* rt = deviceRuntime(); rt && rt->synchronousForTests()) {
    for (const PendingCall& c : calls) GYRE_CHECK(rt->streamSynchronize(c.stream));
    for (const PendingCall& c : calls) GYRE_CHECK(checkUsable(c.comm, c.coll));
  }
  return ncclSuccess;
}

ncclResult_t launchLoneCall(const PendingCall& call) {
  if (call.comm->isHost) {
    // A lone collective repeating the thread's last one (src/host/repeat_call.h).
    if (repeatsLastCall(call, *call.comm->host)) {
      ncclComm* comm = call.comm;
      ActiveCalls active(&comm, 1);
      GYRE_CHECK(checkUsable(comm, call.coll));
      return rerunLastCall(call, comm->host.get());
    }
  }
  thread_local std::vector<PendingCall> single;  // reused: a lone call allocates nothing
  single.assign(1, call);
  return launchCalls(single);
}

namespace {

ncclResult_t runOnHostExecutor(std::vector<PendingCall>& calls) {
  std::vector<ncclComm*>& comms = tlsComms;
  comms.clear();
  for (const PendingCall& c : calls)
    if (std::find(comms.begin(), comms.end(), c.comm) == comms.end()) comms.push_back(c.comm);
  ActiveCalls active(comms);
  ScopedLogRank logRank(comms.empty() ? -1 : comms[0]->rank);
  for (const PendingCall& c : calls) GYRE_CHECK(checkUsable(c.comm, c.coll));
  thread_local std::vector<HostCall> hostCalls;  // reused: a lone call allocates nothing here
  hostCalls.clear();
  for (const PendingCall& c : calls) hostCalls.push_back(onHostView(c));
  return runHostCalls(hostCalls);
}

}  // namespace

}  // namespace gyre
