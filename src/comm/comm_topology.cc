#include "src/comm/comm_topology.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "src/comm/comm.h"
#include "src/comm/executor_binding.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/topology/detect.h"
#include "src/topology/net_devices.h"
#include "src/topology/xml.h"
#include "src/transport/p2p/p2p_transport.h"
#include "src/transport/net/network.h"
#include "src/transport/transport.h"

namespace gyre {
namespace {

// Detection (or NCCL_TOPO_FILE) happens once per process: the settings are a
// per-process snapshot and the hardware does not change under a job, while
// a process may create many communicators.
ncclResult_t cachedHostTopology(topo::Topology* out) {
  static std::mutex mutex;
  static bool done = false;
  static ncclResult_t result = ncclSuccess;
  static std::string error;
  static topo::Topology topology;
  std::lock_guard<std::mutex> lock(mutex);
  if (!done) {
    result = topo::hostTopology(&topology);
    if (result != ncclSuccess) error = lastErrorText();
    for (const std::string& nic : topo::dropUnusableNics(topo::netDeviceFilterFromSettings(), &topology))
      GYRE_INFO("INIT", "NIC %s is not usable with NCCL_SOCKET_IFNAME/NCCL_IB_HCA; left out of the plan", nic.c_str());
    done = true;
  }
  if (result != ncclSuccess) return fail(result, "%s", error.c_str());
  *out = topology;
  return ncclSuccess;
}

// Rank of the first rank on each rank's host: that rank's topology stands for the host.
std::vector<int> hostLeaders(const std::vector<PeerInfo>& peers) {
  std::vector<int> leader(peers.size());
  for (size_t r = 0; r < peers.size(); ++r) {
    leader[r] = static_cast<int>(r);
    for (size_t q = 0; q < r; ++q)
      if (peers[q].hostHash == peers[r].hostHash) {
        leader[r] = static_cast<int>(q);
        break;
      }
  }
  return leader;
}

// Every host leader's topology XML, gathered on every rank (empty for the others).
ncclResult_t gatherTopologies(ncclComm* comm, const std::string& mine, const Deadline& deadline,
                              std::vector<std::string>* out) {
  int n = comm->nranks;
  std::vector<uint64_t> sizes(n);
  sizes[comm->rank] = mine.size();
  GYRE_CHECK(comm->bootstrap->allGather(sizes.data(), sizeof(uint64_t), deadline, &comm->abortFlag));
  uint64_t width = 1;
  for (uint64_t s : sizes) width = std::max(width, s);
  std::vector<char> blobs(width * n);
  std::copy(mine.begin(), mine.end(), blobs.begin() + width * comm->rank);
  GYRE_CHECK(comm->bootstrap->allGather(blobs.data(), width, deadline, &comm->abortFlag));
  out->resize(n);
  for (int r = 0; r < n; ++r) (*out)[r].assign(blobs.data() + width * r, sizes[r]);
  return ncclSuccess;
}

// Where rank r sits on its host: its GPU, or for host memory the NUMA node
// its CPU affinity names. A site the host's topology lacks (a topology file
// describing other hardware) falls back to the host's first CPU.
// The topology's GPU at the rank's PCI address (ordinals differ between
// processes under CUDA_VISIBLE_DEVICES), else its CUDA ordinal.
int gpuOfRank(const PeerInfo& peer, const topo::Topology& t) {
  if (peer.isHostComm) return -1;
  if (peer.busId >= 0) {
    char bus[32];
    snprintf(bus, sizeof(bus), "%04llx:%02llx:%02llx.%llx", static_cast<unsigned long long>(peer.busId >> 32),
             static_cast<unsigned long long>((peer.busId >> 16) & 0xff),
             static_cast<unsigned long long>((peer.busId >> 8) & 0xff),
             static_cast<unsigned long long>(peer.busId & 0xff));
    for (int g : t.ofKind(topo::NodeKind::Gpu))
      if (t.nodes[g].busId == bus) return t.nodes[g].index;
  }
  return peer.cudaDev;
}

topo::RankSite rankSite(const PeerInfo& peer, int host, const topo::Topology& t) {
  topo::RankSite s;
  s.host = host;
  s.gpu = gpuOfRank(peer, t);
  s.cpu = peer.numaNode;
  if (s.gpu >= 0 && t.gpuByDevice(s.gpu) < 0) {
    GYRE_WARN("rank %d uses CUDA device %d, which the topology of %s does not list; planning it as host memory",
              peer.rank, s.gpu, peer.host);
    s.gpu = -1;
  }
  bool numaKnown = false;
  for (int c : t.ofKind(topo::NodeKind::Cpu)) numaKnown |= t.nodes[c].index == s.cpu;
  if (!numaKnown) s.cpu = -1;
  return s;
}

ncclResult_t buildPlacement(ncclComm* comm, const Deadline& deadline, topo::Placement* out) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  std::vector<int> leader = hostLeaders(peers);
  std::string mine;
  if (leader[comm->rank] == comm->rank) {
    topo::Topology t;
    GYRE_CHECK(cachedHostTopology(&t));
    mine = topo::writeXml(topo::topologyToXml(t));
  }
  std::vector<std::string> xml;
  GYRE_CHECK(gatherTopologies(comm, mine, deadline, &xml));
  std::vector<int> hostOf(comm->nranks, -1);
  for (int r = 0; r < comm->nranks; ++r) {
    if (leader[r] != r) continue;
    topo::Topology t;
    std::string origin = std::string("topology of host ") + peers[r].host + " (from rank " + std::to_string(r) + ")";
    GYRE_CHECK(topo::parseTopologyText(xml[r], origin, &t));
    hostOf[r] = static_cast<int>(out->hosts.size());
    out->hosts.push_back(topo::makeHost(std::move(t)));
  }
  for (int r = 0; r < comm->nranks; ++r) {
    int h = hostOf[leader[r]];
    out->ranks.push_back(rankSite(peers[r], h, out->hosts[h].topo));
  }
  return topo::validatePlacement(*out);
}

}  // namespace

ncclResult_t planRings(ncclComm* comm, const RingOptions& opts, CommTopology* out);

ncclResult_t discoverTopology(ncclComm* comm, const Deadline& deadline, CommTopology* out) {
  GYRE_CHECK(topo::readTransportPolicy(&out->policy));
  GYRE_CHECK(selectNetwork(nullptr));  // NCCL_NET / NCCL_NET_PLUGIN / NCCL_IB_* errors fail init here
  GYRE_CHECK(buildPlacement(comm, deadline, &out->placement));
  int64_t minChannels = 1, maxChannels = 1;
  GYRE_CHECK(env::getInt("NCCL_MIN_NCHANNELS", &minChannels));
  GYRE_CHECK(env::getInt("NCCL_MAX_NCHANNELS", &maxChannels));
  if (minChannels > maxChannels)
    return fail(ncclInvalidArgument, "NCCL_MIN_NCHANNELS=%lld exceeds NCCL_MAX_NCHANNELS=%lld",
                static_cast<long long>(minChannels), static_cast<long long>(maxChannels));
  out->minChannels = static_cast<int>(minChannels);
  RingOptions opts;
  opts.minChannels = static_cast<int>(minChannels);
  opts.maxChannels = static_cast<int>(maxChannels);
  if (comm->isHost) opts.minChannels = std::max(opts.minChannels, std::min(opts.maxChannels, kHostMinChannels));
  out->maxChannels = opts.maxChannels;
  return planRings(comm, opts, out);
}

ncclResult_t planRings(ncclComm* comm, const RingOptions& opts, CommTopology* out) {
  GYRE_CHECK(buildRings(out->placement, opts, &out->rings));
  if (comm->rank == 0) logRings(out->placement, out->rings);
  buildTuningTable(out->rings, comm->nranks, comm->isHost, runsKernels(comm), &out->tuning);
  GYRE_CHECK(hostThresholds(&out->tuning.host));
  if (comm->rank == 0) {
    logTuningTable(out->tuning);
    for (int i = 0; i < HostThresholds::kCount; ++i) {
      const HostThresholdSpec& s = hostThresholdSpecs()[i];
      GYRE_INFO("TUNING", "host threshold %s: %s (%s)", s.name, thresholdText(out->tuning.host.*s.field).c_str(),
                out->tuning.host.why[i].c_str());
    }
  }
  return ncclSuccess;
}

ncclResult_t planKernelRings(ncclComm* comm, CommTopology* t) {
  RingOptions opts;
  opts.maxChannels = t->maxChannels;
  opts.minChannels = std::max(t->minChannels, std::min(t->maxChannels, kKernelMinChannels));
  return planRings(comm, opts, t);  // also the tuning table, now with LL
}

int helperNumaNode(const CommTopology& t, int rank) {
  const topo::RankSite& site = t.placement.ranks[rank];
  if (site.gpu < 0) return site.cpu;
  const topo::HostModel& host = t.placement.hosts[site.host];
  int cpu = topo::nearestCpu(host.topo, host.paths, topo::rankNode(t.placement, rank));
  return cpu < 0 ? -1 : host.topo.nodes[cpu].index;
}

namespace {

topo::EdgeTransport edgeKind(const ncclComm* comm, int peer) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const CommTopology& t = *comm->topology;
  topo::Path path = topo::rankPath(t.placement, comm->rank, peer);
  bool bothGpus = !peers[comm->rank].isHostComm && !peers[peer].isHostComm;
  return topo::chooseEdgeTransport(path, bothGpus, t.policy);
}

}  // namespace

// The p2p transport serves only the device executor, so it is not in the
// registry's list: host lanes (and staged device calls) never get it.
Transport* transportForPeer(const ncclComm* comm, int peer, bool forDeviceExecutor) {
  if (forDeviceExecutor) return p2pTransport();
  if (edgeKind(comm, peer) == topo::EdgeTransport::NET) return networkTransport();
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  return pickTransport(peers[comm->rank], peers[peer]);
}

bool anyNetworkEdge(const ncclComm* comm) {
  for (int r = 0; r < comm->nranks; ++r)
    if (r != comm->rank && edgeKind(comm, r) == topo::EdgeTransport::NET) return true;
  return false;
}

bool p2pToEveryPeer(const ncclComm* comm) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  for (int r = 0; r < comm->nranks; ++r)
    if (r != comm->rank &&
        (edgeKind(comm, r) != topo::EdgeTransport::P2P || !p2pTransport()->canConnect(peers[comm->rank], peers[r])))
      return false;
  return true;
}

void openTuner(ncclComm* comm) {
  const TunerLibrary* lib = processTunerLibrary();
  if (!lib) return;
  const topo::Placement& p = comm->topology->placement;
  std::vector<int> perHost(p.hosts.size(), 0);
  for (const topo::RankSite& site : p.ranks) ++perHost[site.host];
  TunerSession::Facts f;
  f.commId = comm->observer.commId;
  f.rank = comm->rank;
  f.nranks = comm->nranks;
  f.nnodes = static_cast<int>(p.hosts.size());
  f.minRanksPerNode = perHost.empty() ? 1 : *std::min_element(perHost.begin(), perHost.end());
  f.maxRanksPerNode = perHost.empty() ? 1 : *std::max_element(perHost.begin(), perHost.end());
  comm->tunerSession = TunerSession::open(*lib, f);
  comm->tuner = comm->tunerSession.get();
}

PlanContext planContextOf(const ncclComm* comm) { return planContextOf(static_cast<const Wiring&>(*comm)); }

}  // namespace gyre
