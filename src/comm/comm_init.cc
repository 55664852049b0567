#include "src/comm/comm_init.h"

#include <unistd.h>

#include <cstddef>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <thread>

#include "src/bootstrap/rendezvous.h"
#include "src/bootstrap/root_gather.h"
#include "src/comm/comm.h"
#include "src/comm/config_read.h"
#include "src/comm/connect_channels.h"
#include "src/comm/net_gpu_direct.h"
#include "src/comm/peer_settings.h"
#include "src/comm/single_copy.h"
#include "src/comm/cuda_device.h"
#include "src/comm/executor_binding.h"
#include "src/device/device_layer.h"
#include "src/device/on_device.h"
#include "src/host/host_comm.h"
#include "src/device/runtime/runtime.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/fork_guard.h"
#include "src/debug/log.h"
#include "src/plan/host_thresholds.h"
#include "src/plan/planner.h"
#include "src/topology/affinity.h"
#include "src/topology/cpu_facts.h"

namespace gyre {
namespace {

// Extra time ranks give the root beyond GYRE_INIT_TIMEOUT, so the root's
// "rank K did not join" message reaches them before their own timeout fires.
constexpr double kRootGraceSeconds = 5.0;

// Ranks with the same hash share a host (shared memory, one topology).
// NCCL_HOSTID replaces the identity, as in NCCL: containers on one machine
// can declare themselves apart, and tests can plan several hosts on one.
uint64_t hostHash(const char* host) {
  std::string forced = env::getString("NCCL_HOSTID");
  if (!forced.empty()) return fnv1a(forced.data(), forced.size());
  std::string id = host;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string bootId;
  if (boot >> bootId) id += bootId;
  // Processes in different network namespaces cannot meet on the abstract
  // Unix sockets the shm transport hands its segments over, so they count as
  // different hosts (containers with their own network on one machine).
  char netns[64] = {};
  if (readlink("/proc/self/ns/net", netns, sizeof(netns) - 1) > 0) id += netns;
  return fnv1a(id.data(), id.size());
}

// Settings every rank must share (peer_settings.h), and the FIFO size they agree on.
ncclResult_t agreeWithPeers(ncclComm* comm) {
  bool allDefault = false;
  int64_t buffSize = 0;
  GYRE_CHECK(agreeOnPeerSettings(comm->bootstrap->peers(), &buffSize, &allDefault));
  comm->slotBytes = static_cast<size_t>(buffSize) / kFifoSlots;
  if (comm->rank == 0 && comm->isHost)
    GYRE_INFO("TUNING", "FIFO bytes a connection: %s (%s)", thresholdText(static_cast<size_t>(buffSize)).c_str(),
              allDefault ? "NCCL_BUFFSIZE unset: from the ranks' CPUs, the smallest" : "NCCL_BUFFSIZE");
  return ncclSuccess;
}

// NCCL_BUFFSIZE, and whether it was left unset (peer_settings.h then picks
// a host-memory communicator's FIFOs from the ranks' CPUs).
ncclResult_t localBuffSize(int64_t* bytes, bool* isDefault) {
  GYRE_CHECK(env::getInt("NCCL_BUFFSIZE", bytes));
  *isDefault = !env::isSet(env::lookup("NCCL_BUFFSIZE"));
  return ncclSuccess;
}

// The ids' contents; several must be distinct ncclGetUniqueId ids (an
// NCCL_COMM_ID root lives in rank 0, and the roots must be different ones).
ncclResult_t decodeIds(const std::vector<ncclUniqueId>& ids, std::vector<UniqueIdContents>* out) {
  out->resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    GYRE_CHECK(decodeUniqueId(ids[i], &(*out)[i]));
    if (ids.size() > 1 && (*out)[i].fixedAddress)
      return fail(ncclInvalidArgument, "commIds[%zu] comes from NCCL_COMM_ID; several roots need ids from "
                  "ncclGetUniqueId, each made by a different call", i);
    for (size_t k = 0; k < i; ++k)
      if ((*out)[k].root.toString() == (*out)[i].root.toString())
        return fail(ncclInvalidArgument, "commIds[%zu] and commIds[%zu] name the same root %s; each id must come "
                    "from its own ncclGetUniqueId call", k, i, (*out)[i].root.toString().c_str());
  }
  return ncclSuccess;
}

ncclResult_t buildComm(ncclComm* comm, const std::vector<ncclUniqueId>& ids, std::thread* rootThread) {
  int64_t buffSize = 0, initTimeout = 0, collTimeout = 0;
  GYRE_CHECK(env::validateAll());
  GYRE_CHECK(validateAlgorithmSettings());
  bool buffSizeDefault = false;
  GYRE_CHECK(localBuffSize(&buffSize, &buffSizeDefault));
  GYRE_CHECK(env::getInt("GYRE_INIT_TIMEOUT", &initTimeout));
  GYRE_CHECK(env::getInt("GYRE_TIMEOUT", &collTimeout));
  comm->collTimeoutSeconds = static_cast<double>(collTimeout);

  std::vector<UniqueIdContents> contents;
  GYRE_CHECK(decodeIds(ids, &contents));
  if (contents[0].fixedAddress && comm->rank == 0) GYRE_CHECK(startFixedRoot(contents[0], rootThread));

  PeerInfo self{};
  self.rank = comm->rank;
  self.pid = getpid();
  gethostname(self.host, sizeof(self.host) - 1);
  self.hostHash = hostHash(self.host);
  self.cudaDev = comm->cudaDev;
  self.busId = -1;
  if (!comm->isHost) GYRE_CHECK(deviceRuntime()->busIdOf(comm->cudaDev, &self.busId));
  self.isHostComm = comm->isHost ? 1 : 0;
  self.buffSize = buffSize;
  self.buffSizeDefault = buffSizeDefault ? 1 : 0;
  self.l2Bytes = static_cast<int64_t>(topo::hostCpuFacts().l2Bytes);
  self.numaNode = topo::processNumaNode();
  Deadline connectDeadline = Deadline::afterSeconds(static_cast<double>(initTimeout));
  // Several roots: root 0 waits a little longer for the others (root_gather.h).
  const double grace = kRootGraceSeconds + (ids.size() > 1 ? 2 * kRootExchangeGraceSeconds : 0.0);
  Deadline deadline = Deadline::afterSeconds(static_cast<double>(initTimeout) + grace);
  GYRE_CHECK(Bootstrap::create(contents, comm->rank, comm->nranks, self, connectDeadline, deadline,
                               &comm->abortFlag, &comm->bootstrap));
  GYRE_CHECK(agreeWithPeers(comm));
  GYRE_CHECK(enablePeerAccessInProcess(comm));
  int ranksOnHost = 0;
  for (const PeerInfo& p : comm->bootstrap->peers()) ranksOnHost += p.hostHash == self.hostHash ? 1 : 0;
  shareBootstrapFacts(comm);
  if (ranksOnHost > sysconf(_SC_NPROCESSORS_ONLN)) comm->host->spinsBeforeBlocking = 0;
  comm->topology = std::make_unique<CommTopology>();
  comm->tuning = &comm->topology->tuning;
  GYRE_CHECK(discoverTopology(comm, deadline, comm->topology.get()));
  if (comm->device) GYRE_CHECK(setupDeviceExecutors(comm->device.get(), p2pToEveryPeer(comm), deadline));
  logNetGpuDirect(comm);
  if (runsKernels(comm)) GYRE_CHECK(planKernelRings(comm, comm->topology.get()));
  int nchannels = static_cast<int>(comm->topology->rings.channels.size());
  comm->minChannels = std::min(comm->topology->minChannels, nchannels);
  GYRE_CHECK(connectRings(comm, deadline));
  GYRE_CHECK(connectTrees(comm, deadline));
  GYRE_CHECK(connectDoubling(comm, deadline));
  GYRE_CHECK(connectMesh(comm, deadline));
  GYRE_CHECK(finishConnections(comm));
  comm->shmRings = ringsOnSharedMemory(comm);
  GYRE_CHECK(probeSingleCopy(comm, deadline));
  shareInitConnections(comm);
  startDeviceWatchdog(comm->device.get());
  // Nobody returns from init before every rank's connections exist.
  GYRE_CHECK(comm->bootstrap->barrier(deadline, &comm->abortFlag));
  startObserving(&comm->observer, comm->bootstrap->secret(), comm->bootstrap->peers(), comm->rank, comm->isHost);
  openTuner(comm);
  return ncclSuccess;
}

ncclResult_t buildAndJoinRoot(ncclComm* comm, const std::vector<ncclUniqueId>& ids) {
  std::thread rootThread;
  ncclResult_t r = buildComm(comm, ids, &rootThread);
  if (rootThread.joinable()) rootThread.join();
  return r;
}

}  // namespace

ncclResult_t initCommunicator(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                              const ncclConfig_t* config, bool isHost, const char* caller) {
  return initCommunicator(out, nranks, std::vector<ncclUniqueId>{id}, rank, config, isHost, caller);
}

ncclResult_t initCommunicator(ncclComm_t* out, int nranks, const std::vector<ncclUniqueId>& ids, int rank,
                              const ncclConfig_t* config, bool isHost, const char* caller) {
  GYRE_CHECK(checkNotForkedChild(caller));
  if (!out) return fail(ncclInvalidArgument, "%s: comm (the output pointer) is NULL", caller);
  *out = nullptr;
  if (nranks < 1) return fail(ncclInvalidArgument, "%s: nranks=%d must be at least 1", caller, nranks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "%s: rank=%d is outside 0..%d (nranks=%d)", caller, rank, nranks - 1, nranks);
  if (ids.empty() || static_cast<int>(ids.size()) > nranks)
    return fail(ncclInvalidArgument, "%s: nId=%zu must be in 1..nranks (%d): each root serves at least one rank",
                caller, ids.size(), nranks);
  ncclConfig_t settings;
  GYRE_CHECK(readConfig(config, caller, &settings));
  config = &settings;  // from here on only the fields the caller's config.version has

  auto* comm = new ncclComm();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->isHost = isHost;
  ScopedLogRank logRank(rank);
  ncclResult_t r = isHost ? ncclSuccess : currentCudaDevice(&comm->cudaDev);
  if (r != ncclSuccess) {
    delete comm;
    return r;
  }
  createExecutorViews(comm);
  if (config && config->blocking == 0) {
    // Nonblocking (NCCL's config.blocking = 0): the communicator exists at
    // once, ncclCommGetAsyncError says ncclInProgress until the set-up thread
    // finishes, then ncclSuccess or the error. A failed one stays allocated
    // (without connections) for the caller to destroy or abort.
    comm->asyncError.store(ncclInProgress);
    comm->initThread = std::thread([comm, ids, caller] {
      ScopedLogRank threadRank(comm->rank);
      // Set-up allocates, maps and makes streams on the device current at
      // the call, not on device 0.
      enterDeviceOfThisThread(comm->isHost ? -1 : comm->cudaDev);
      ncclResult_t result = buildAndJoinRoot(comm, ids);
      if (result != ncclSuccess) {
        {
          std::lock_guard<std::mutex> lock(comm->errorMutex);
          comm->errorText = lastErrorText();
        }
        releaseCommResources(comm);
      } else {
        GYRE_INFO("INIT", "%s: rank %d of %d ready (nonblocking)", caller, comm->rank, comm->nranks);
      }
      comm->asyncError.store(result);
    });
    *out = comm;
    return ncclInProgress;
  }
  r = buildAndJoinRoot(comm, ids);
  if (r != ncclSuccess) {
    releaseCommResources(comm);
    comm->magic = 0;
    delete comm;
    return r;
  }
  GYRE_INFO("INIT", "%s: rank %d of %d ready (%s memory)", caller, rank, nranks, isHost ? "host" : "device");
  *out = comm;
  return ncclSuccess;
}

}  // namespace gyre
