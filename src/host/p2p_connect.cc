#include "src/host/p2p_connect.h"

#include <string>

#include "src/debug/deadline.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

ncclResult_t connectOne(HostComm* comm, int peer, bool isSend) {
  Wiring& w = *comm->wiring;
  auto& table = isSend ? w.p2pSend : w.p2pRecv;
  if (table.count(peer)) return ncclSuccess;
  if (peer < 0 || peer >= static_cast<int>(w.p2pTransports.size()) || !w.p2pTransports[peer])
    return fail(ncclInternalError, "rank %d: no transport to rank %d for send/recv", w.rank, peer);
  auto conn = std::make_unique<Connection>();
  conn->peer = peer;
  conn->isSend = isSend;
  conn->transport = w.p2pTransports[peer];
  ConnectContext ctx{w.p2pBootstrap, w.rank, kP2PChannelId, w.slotBytes,
                     Deadline::afterSeconds(comm->timeoutSeconds), comm->abortFlag, w.p2pHelperNuma};
  ncclResult_t r = isSend ? conn->transport->connectSend(ctx, peer, conn.get())
                          : conn->transport->connectRecv(ctx, peer, conn.get());
  if (r != ncclSuccess) {
    if (conn->state) conn->transport->close(*conn);
    if (comm->abortFlag->load()) return r;
    std::string why = lastErrorText();  // copied: fail() rewrites that buffer
    return fail(ncclRemoteError,
                "%s: rank %d could not connect %s rank %d within %.0f s (GYRE_TIMEOUT); did rank %d make the "
                "matching %s? (%s)",
                isSend ? "ncclSend" : "ncclRecv", w.rank, isSend ? "to" : "from", peer, comm->timeoutSeconds,
                peer, isSend ? "ncclRecv" : "ncclSend", why.c_str());
  }
  GYRE_INFO("P2P", "connected %s rank %d over %s", isSend ? "to" : "from", peer, conn->transport->name());
  comm->progress.add(conn.get());
  table[peer] = std::move(conn);
  return ncclSuccess;
}

}  // namespace

ncclResult_t connectPeersFor(const std::vector<HostCall>& calls) {
  for (bool sendPass : {true, false})
    for (const HostCall& c : calls)
      if (c.coll == CollKind::SendRecv && c.isSend == sendPass && c.root != c.comm->rank && c.count > 0)
        GYRE_CHECK(connectOne(c.comm, c.root, c.isSend));
  return ncclSuccess;
}

}  // namespace gyre
