#include "src/host/lane.h"

namespace gyre {

Connection* Lane::blockingConnection() const {
  if (done() || waiting()) return nullptr;
  const Step& s = spec_.steps[next_];
  if (stepReceives(s.kind) && !recvDataReady(*spec_.recv[s.recvConn])) return spec_.recv[s.recvConn];
  if (stepSends(s.kind)) return spec_.send[s.sendConn];
  return nullptr;
}

SlotMeta makeSlotMeta(const LaneSpec& spec, uint32_t bytes) {
  SlotMeta m{};
  m.opCount = spec.opCount;
  m.count = spec.count;
  m.bytes = bytes;
  m.coll = static_cast<uint8_t>(spec.coll);
  m.datatype = static_cast<uint8_t>(spec.datatype);
  m.redop = static_cast<uint8_t>(spec.op < ncclNumOps ? spec.op : 0xff);
  return m;
}

ncclResult_t checkSlotMeta(const LaneSpec& spec, const Connection& in, uint32_t expectedBytes) {
  const SlotMeta& got = in.fifo.metaOf(in.step);
  SlotMeta want = makeSlotMeta(spec, expectedBytes);
  ncclResult_t r = ncclSuccess;
  if (got.opCount != want.opCount || got.coll != want.coll || got.count != want.count ||
      got.datatype != want.datatype || got.redop != want.redop) {
    r = fail(ncclInvalidUsage,
             "mismatched calls: rank %d sent data for %s #%llu (count %llu, datatype %d, op %d) while this rank "
             "is in %s #%llu (count %llu, datatype %d, op %d)",
             in.peer, collName(static_cast<CollKind>(got.coll)), static_cast<unsigned long long>(got.opCount),
             static_cast<unsigned long long>(got.count), got.datatype, got.redop, collName(spec.coll),
             static_cast<unsigned long long>(want.opCount), static_cast<unsigned long long>(want.count),
             want.datatype, want.redop);
  } else if (got.bytes != expectedBytes) {
    r = fail(ncclInternalError, "%s #%llu: rank %d sent %u bytes for a %u-byte step", collName(spec.coll),
             static_cast<unsigned long long>(want.opCount), in.peer, got.bytes, expectedBytes);
  }
  if (r != ncclSuccess) markCommFailed(spec.comm, r, in.peer);
  return r;
}

}  // namespace gyre
