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
  const SlotMeta& got = in.fifo.metaOf(in.step);
  SlotMeta want = makeSlotMeta(spec, expectedBytes);
  ncclResult_t r = ncclSuccess;
  if (got.opCount != want.opCount || got.coll != want.coll || got.count != want.count ||
      got.datatype != want.datatype || got.redop != want.redop || got.root != want.root) {
    r = failMismatchedCalls(in.peer, got, spec.rank, want);
  } else if (got.bytes != expectedBytes) {
    r = fail(ncclInternalError, "%s #%llu: rank %d sent %u bytes for a %u-byte step", collName(spec.coll),
             static_cast<unsigned long long>(want.opCount), in.peer, got.bytes, expectedBytes);
  }
  if (r != ncclSuccess) comm->markFailed(r, in.peer);
  return r;
}

}  // namespace gyre
