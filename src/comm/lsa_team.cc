#include "src/comm/lsa_team.h"

#include <cstdio>
#include <vector>

#include "src/comm/comm.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

// "" when this rank reaches `peer` by loads and stores, else why not.
std::string unreachable(const ncclComm* comm, int peer) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const PeerInfo& me = peers[comm->rank];
  const PeerInfo& p = peers[peer];
  if (peer == comm->rank || (p.hostHash == me.hostHash && p.pid == me.pid)) return "";
  char why[256];
  if (p.hostHash != me.hostHash) {
    snprintf(why, sizeof(why), "rank %d is on host %s, not this rank's %s", peer, p.host, me.host);
    return why;
  }
  if (comm->isHost) {
    snprintf(why, sizeof(why), "rank %d is another process (pid %d) of a host-memory communicator", peer, p.pid);
    return why;
  }
  DeviceRuntime* rt = deviceRuntime();
  int device = -1;
  if (!rt || !rt->deviceAtBusId(p.busId, &device)) {
    snprintf(why, sizeof(why), "rank %d's GPU is not visible to this process", peer);
    return why;
  }
  if (device != comm->cudaDev && !(rt->canAccessPeer(comm->cudaDev, device) && rt->canAccessPeer(device, comm->cudaDev))) {
    snprintf(why, sizeof(why), "rank %d's GPU %d and this rank's GPU %d have no peer access", peer, device,
             comm->cudaDev);
    return why;
  }
  return "";
}

}  // namespace

LsaTeam lsaTeamOf(const ncclComm* comm) {
  LsaTeam t;
  std::vector<std::string> why(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) {
    why[r] = unreachable(comm, r);
    if (t.whyNotWorld.empty() && !why[r].empty()) t.whyNotWorld = why[r];
  }
  int lo = comm->rank, hi = comm->rank;
  while (lo > 0 && why[lo - 1].empty()) --lo;
  while (hi + 1 < comm->nranks && why[hi + 1].empty()) ++hi;
  t.base = lo;
  t.size = hi - lo + 1;
  return t;
}

}  // namespace gyre
