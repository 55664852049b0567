#include "src/enqueue/p2p_connect.h"

#include <string>

#include "src/comm/comm.h"
#include "src/comm/comm_topology.h"
#include "src/host/host_comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

ncclResult_t connectOne(ncclComm* comm, int peer, bool isSend) {
  auto& table = isSend ? comm->p2pSend : comm->p2pRecv;
  if (table.count(peer)) return ncclSuccess;
  auto conn = std::make_unique<Connection>();
  conn->peer = peer;
  conn->isSend = isSend;
  conn->transport = transportForPeer(comm, peer);
  ConnectContext ctx{comm->bootstrap.get(), comm->rank, kP2PChannelId, comm->slotBytes,
                     Deadline::afterSeconds(comm->collTimeoutSeconds), &comm->abortFlag,
                     helperNumaNode(*comm->topology, comm->rank)};
  ncclResult_t r = isSend ? conn->transport->connectSend(ctx, peer, conn.get())
                          : conn->transport->connectRecv(ctx, peer, conn.get());
  if (r != ncclSuccess) {
    if (conn->state) conn->transport->close(*conn);
    if (comm->abortFlag.load()) return r;
    std::string why = lastErrorText();  // copied: fail() rewrites that buffer
    return fail(ncclRemoteError,
                "%s: rank %d could not connect %s rank %d within %.0f s (GYRE_TIMEOUT); did rank %d make the "
                "matching %s? (%s)",
                isSend ? "ncclSend" : "ncclRecv", comm->rank, isSend ? "to" : "from", peer, comm->collTimeoutSeconds,
                peer, isSend ? "ncclRecv" : "ncclSend", why.c_str());
  }
  GYRE_INFO("P2P", "connected %s rank %d over %s", isSend ? "to" : "from", peer, conn->transport->name());
  comm->host->progress.add(conn.get());
  table[peer] = std::move(conn);
  return ncclSuccess;
}

}  // namespace

ncclResult_t connectPeersFor(const std::vector<PendingCall>& calls) {
  for (bool sendPass : {true, false})
    for (const PendingCall& c : calls)
      if (c.coll == CollKind::SendRecv && c.isSend == sendPass && c.root != c.comm->rank && c.count > 0)
        GYRE_CHECK(connectOne(c.comm, c.root, c.isSend));
  return ncclSuccess;
}

}  // namespace gyre
