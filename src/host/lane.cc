#include "src/host/lane.h"


namespace gyre {

Connection* Lane::blockingConnection() const {
  if (done() || waiting()) return nullptr;
  if (heldBySend_) return heldBySend_;
  const Step& s = spec_.steps[next_];
  if (s.flags & kStepAllPeers)  // waits on every receive connection: name one that is behind
    for (size_t i = 0; i < spec_.nrecv; ++i)
      if (!recvDataReady(*spec_.recv[i])) return spec_.recv[i];
  if (stepReceives(s.kind) && !recvDataReady(*spec_.recv[s.recvConn])) return spec_.recv[s.recvConn];
  if (stepSends(s.kind)) return spec_.send[s.sendConn];
  return nullptr;
}

ncclResult_t checkSlotMeta(const LaneSpec& spec, HostComm* comm, const Connection& in, uint32_t expectedBytes) {
  const SlotMeta got = in.fifo.metaOf(in.step);
  ncclResult_t r = checkPeerSlotMeta(in.peer, got, spec.rank, makeSlotMeta(spec, expectedBytes), spec.coll);
  if (r != ncclSuccess) comm->markFailed(r, in.peer);
  return r;
}

}  // namespace gyre
