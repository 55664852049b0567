#include "src/comm/net_gpu_direct.h"

#include "src/comm/comm.h"
#include "src/comm/comm_topology.h"
#include "src/debug/log.h"
#include "src/topology/placement.h"
#include "src/transport/net/gpu_direct.h"
#include "src/transport/net/network.h"

namespace gyre {
namespace {

// The GPU's nearest NIC on its host (by path type, then order) into `in`;
// none where the topology shows no GPU for the rank (a fake runtime).
void nearestNic(const topo::Placement& p, int rank, GpuDirectInputs* in) {
  const topo::RankSite& site = p.ranks[rank];
  const topo::HostModel& host = p.hosts[site.host];
  if (site.gpu < 0) return;
  const int gpu = topo::rankNode(p, rank);
  if (gpu < 0) return;
  for (int nic : host.topo.ofKind(topo::NodeKind::Nic)) {
    const topo::Path& path = host.paths.at(gpu, nic);
    if (!path.valid || (in->pathKnown && path.type >= in->path)) continue;
    in->pathKnown = true;
    in->path = path.type;
    in->gpu = host.topo.nodes[gpu].id;
    in->nic = host.topo.nodes[nic].id;
  }
}

}  // namespace

void logNetGpuDirect(const ncclComm* comm) {
  if (!comm->device || !comm->topology) return;
  const topo::Placement& placement = comm->topology->placement;
  if (comm->rank >= static_cast<int>(placement.ranks.size())) return;
  const Network* net = nullptr;
  if (!anyNetworkEdge(comm) || selectNetwork(&net) != ncclSuccess) return;

  GpuDirectInputs in;
  nearestNic(placement, comm->rank, &in);
  in.gdrLevel = comm->topology->policy.gdrLevel;
  in.network = net->name;
  gyreNetProperties_v8_t props{};
  in.networkDmabuf = net->api && net->api->getProperties && net->api->getProperties(0, &props) == ncclSuccess &&
                     (props.ptrSupport & GYRE_NET_PTR_DMABUF);
  in.cudaWhyNot = cudaDmabufWhyNot();
  in.executorDirect = false;  // device collectives over the network run staged (src/device)
  GYRE_INFO("NET", "NET/%s: %s", net->name.c_str(), chooseGpuDirect(in).why.c_str());
}

}  // namespace gyre
