#include "src/comm/executor_binding.h"

#include "src/comm/comm.h"
#include "src/comm/comm_topology.h"
#include "src/device/device_comm.h"
#include "src/host/host_comm.h"

namespace gyre {

void createExecutorViews(ncclComm* comm) {
  comm->host = std::make_unique<HostComm>();
  comm->host->rank = comm->rank;
  comm->host->nranks = comm->nranks;
  comm->host->abortFlag = &comm->abortFlag;
  comm->host->wiring = comm;
  comm->host->observer = &comm->observer;
  comm->host->opCount = &comm->opCount;
  comm->host->serial = comm->serial;
  comm->host->asyncError = &comm->asyncError;
  comm->host->errorMutex = &comm->errorMutex;
  comm->host->errorText = &comm->errorText;
  if (comm->isHost) return;
  comm->device = std::make_unique<DeviceComm>(comm->abortFlag, comm->asyncError, comm->opCount);
  DeviceComm& d = *comm->device;
  d.observer = &comm->observer;
  d.rank = comm->rank;
  d.nranks = comm->nranks;
  d.cudaDev = comm->cudaDev;
  d.wiring = comm;
  d.host = comm->host.get();
  comm->runsKernels = &d.deviceKernels;
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
  comm->p2pBootstrap = comm->bootstrap.get();
  comm->p2pHelperNuma = helperNumaNode(*comm->topology, comm->rank);
  comm->p2pTransports.assign(comm->nranks, nullptr);
  for (int peer = 0; peer < comm->nranks; ++peer)
    if (peer != comm->rank) comm->p2pTransports[peer] = transportForPeer(comm, peer);
  if (!comm->device) return;
  comm->device->initConnections.clear();
  anyInitConnection(comm, [&](Connection* c) {
    comm->device->initConnections.push_back(c);
    return false;
  });
}

bool runsKernels(const ncclComm* comm) { return comm->device && comm->device->deviceKernels; }

}  // namespace gyre
