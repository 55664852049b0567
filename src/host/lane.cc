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
  // A line is ready once its sequence word passes the step; the sender
  // stores exactly step + 1 there, and reuses the line only after this rank
  // consumed the step, so any other value is a peer writing out of sequence.
  if (r == ncclSuccess && in.fifo.hasLines()) {
    const uint64_t seq = __atomic_load_n(&in.fifo.lineOf(in.step).seq, __ATOMIC_RELAXED);
    if (seq != in.step + 1)
      r = fail(ncclRemoteError, "%s #%llu: rank %d sent step %llu marked as step %llu (a step out of sequence)",
               collName(spec.coll), static_cast<unsigned long long>(spec.opCount), in.peer,
               static_cast<unsigned long long>(in.step + 1), static_cast<unsigned long long>(seq));
  }
  if (r != ncclSuccess) comm->markFailed(r, in.peer);
  return r;
}

}  // namespace gyre
