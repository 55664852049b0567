#include "src/comm/executor_binding.h"

#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/device/device_comm.h"
#include "src/enqueue/launch.h"
#include "src/host/host_comm.h"

namespace gyre {
namespace {

// The device layer's requests, answered by the communicator.
class CommDeviceHooks final : public DeviceCommHooks {
 public:
  explicit CommDeviceHooks(ncclComm* comm) : comm_(comm) {}

  void markFailed(ncclResult_t code, int culprit) override { markCommFailed(comm_, code, culprit); }

  void noteAsyncError(ncclResult_t code, const std::string& why) override {
    int expected = ncclSuccess;
    if (comm_->asyncError.compare_exchange_strong(expected, code)) {
      std::lock_guard<std::mutex> lock(comm_->errorMutex);
      comm_->errorText = why;
    }
  }

  ncclResult_t laneSpecs(const CollCall& call, std::vector<LaneSpec>* out, bool* ll) override {
    return collectiveLaneSpecs(onThisComm(call, comm_), out, ll);
  }

  ncclResult_t runOnHost(const std::vector<DeviceRequest>& requests) override {
    thread_local std::vector<PendingCall> calls;  // reused: staged pieces run often
    calls.clear();
    for (const DeviceRequest& r : requests)
      calls.push_back(onThisComm(r, static_cast<CommDeviceHooks*>(r.comm->hooks.get())->comm_));
    return runHostCalls(calls);
  }

 private:
  static PendingCall onThisComm(const CollCall& call, ncclComm* comm) {
    PendingCall p;
    static_cast<CollCall&>(p) = call;
    p.comm = comm;
    return p;
  }

  ncclComm* comm_;
};

}  // namespace

void createExecutorViews(ncclComm* comm) {
  comm->host = std::make_unique<HostComm>();
  comm->host->rank = comm->rank;
  comm->host->nranks = comm->nranks;
  comm->host->abortFlag = &comm->abortFlag;
  comm->host->observer = &comm->observer;
  comm->host->markFailed = [comm](ncclResult_t code, int culprit) { markCommFailed(comm, code, culprit); };
  if (comm->isHost) return;
  comm->device = std::make_unique<DeviceComm>(comm->abortFlag, comm->asyncError, comm->opCount);
  DeviceComm& d = *comm->device;
  d.observer = &comm->observer;
  d.rank = comm->rank;
  d.nranks = comm->nranks;
  d.cudaDev = comm->cudaDev;
  d.hooks = std::make_unique<CommDeviceHooks>(comm);
}

void setCollTimeout(ncclComm* comm, double seconds) {
  comm->collTimeoutSeconds = seconds;
  if (comm->host) comm->host->timeoutSeconds = seconds;
  if (comm->device) comm->device->collTimeoutSeconds = seconds;
}

void shareBootstrapFacts(ncclComm* comm) {
  setCollTimeout(comm, comm->collTimeoutSeconds);
  comm->host->peers = &comm->bootstrap->peers();
  if (!comm->device) return;
  comm->device->bootstrap = comm->bootstrap.get();
}

void shareInitConnections(ncclComm* comm) {
  if (!comm->device) return;
  comm->device->initConnections.clear();
  anyInitConnection(comm, [&](Connection* c) {
    comm->device->initConnections.push_back(c);
    return false;
  });
}

bool runsKernels(const ncclComm* comm) { return comm->device && comm->device->deviceKernels; }

}  // namespace gyre
