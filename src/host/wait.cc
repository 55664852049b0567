#include "src/host/wait.h"

#include "src/debug/deadline.h"
#include "src/debug/error.h"

namespace gyre {
namespace {

constexpr int kPollSliceMs = 50;  // also bounds how late an abort is noticed

ncclResult_t peerClosedError(ncclComm* comm, const Connection& conn, const WaitSite& site) {
  const PeerInfo& p = comm->bootstrap->peers()[conn.peer];
  ncclResult_t r = fail(ncclRemoteError,
                        "%s #%llu (channel %d, step %zu of %zu): rank %d (%s pid %d) closed its connection before "
                        "sending the data this rank needs; it died, aborted or left the collective",
                        collName(site.coll), static_cast<unsigned long long>(site.opCount), site.channel,
                        site.stepIndex + 1, site.stepTotal, conn.peer, p.host, p.pid);
  markCommFailed(comm, r, conn.peer);
  return r;
}

template <typename Ready>
ncclResult_t waitUntil(ncclComm* comm, Connection& conn, const WaitSite& site, const char* waitingFor,
                       Ready ready) {
  Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
  for (int spins = 0;; ++spins) {
    int culprit = -1;
    ncclResult_t r = comm->progress.progressAll(&culprit);
    if (r != ncclSuccess) {
      markCommFailed(comm, r, culprit);
      return r;
    }
    if (ready()) return ncclSuccess;
    if (!conn.isSend && conn.peerClosed) return peerClosedError(comm, conn, site);
    if (comm->abortFlag.load(std::memory_order_relaxed))
      return fail(ncclInvalidUsage, "%s #%llu: the communicator was aborted (ncclCommAbort) while waiting for rank %d",
                  collName(site.coll), static_cast<unsigned long long>(site.opCount), conn.peer);
    if (spins < comm->spinsBeforeBlocking) continue;
    if (deadline.expired()) {
      const PeerInfo& p = comm->bootstrap->peers()[conn.peer];
      r = fail(ncclRemoteError,
               "%s #%llu (channel %d, step %zu of %zu): waited %.0f s (GYRE_TIMEOUT) for %s rank %d (%s pid %d); "
               "it is stalled, dead, or not calling the same collective",
               collName(site.coll), static_cast<unsigned long long>(site.opCount), site.channel, site.stepIndex + 1,
               site.stepTotal, comm->collTimeoutSeconds, waitingFor, conn.peer, p.host, p.pid);
      markCommFailed(comm, r, conn.peer);
      return r;
    }
    comm->progress.block(deadline.remainingMs(kPollSliceMs));
  }
}

}  // namespace

ncclResult_t waitSendSlot(ncclComm* comm, Connection& conn, const WaitSite& site) {
  if (sendSlotFree(conn)) return ncclSuccess;
  return waitUntil(comm, conn, site, "buffer space at", [&] { return sendSlotFree(conn); });
}

ncclResult_t waitRecvData(ncclComm* comm, Connection& conn, const WaitSite& site) {
  if (recvDataReady(conn)) return ncclSuccess;
  return waitUntil(comm, conn, site, "data from", [&] { return recvDataReady(conn); });
}



ncclResult_t waitSendsDrained(ncclComm* comm, Connection& conn, const WaitSite& site) {
  auto drained = [&] { return loadAcquire(conn.fifo.head) == conn.step; };
  if (drained()) return ncclSuccess;
  return waitUntil(comm, conn, site, "the send queue to", drained);
}

}  // namespace gyre
