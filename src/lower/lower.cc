#include "src/lower/lower.h"

#include <algorithm>
#include <cstring>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/sched/build_direct.h"
#include "src/sched/build_ring_allreduce.h"
#include "src/sched/build_ring_collectives.h"
#include "src/sched/build_single_copy.h"
#include "src/sched/build_tree_allreduce.h"
#include "src/sched/chunking.h"
#include "src/sched/step_builder.h"

namespace gyre {
namespace {

// One channel's share of a ring collective: elements [begin, begin+count) of
// each block (the whole buffer for AllReduce, Broadcast and Reduce).
// Ring builders think in positions along the channel's ring, not rank numbers.
ncclResult_t buildRingChannel(const Wiring& w, const CollCall& c, const Plan& plan, const Channel& ch, size_t begin,
                              size_t count, ChannelSchedule* out) {
  int rootPos = c.root >= 0 && c.root < w.nranks ? ch.positionOf[c.root] : 0;
  bool inPlace = isInPlace(c, w.rank);
  RingShape shape{ch.position, w.nranks, c.count, plan.chunkElems, rootPos, inPlace, begin, count,
                  ch.ringRanks.data()};
  switch (c.coll) {
    case CollKind::AllReduce:
      buildRingAllReduce({ch.position, w.nranks, begin, count, plan.chunkElems, plan.alignElems}, out);
      return ncclSuccess;
    case CollKind::Broadcast: buildRingBroadcast(shape, out); return ncclSuccess;
    case CollKind::Reduce: buildRingReduce(shape, out); return ncclSuccess;
    case CollKind::AllGather: buildRingAllGather(shape, out); return ncclSuccess;
    case CollKind::ReduceScatter: buildRingReduceScatter(shape, out); return ncclSuccess;
    case CollKind::SendRecv: break;
  }
  return fail(ncclInternalError, "%s has no schedule builder", collName(c.coll));
}

void buildSendRecv(const CollCall& c, size_t chunkElems, ChannelSchedule* out) {
  for (size_t off = 0; off < c.count; off += chunkElems) {
    size_t n = std::min(chunkElems, c.count - off);
    out->steps.push_back(c.isSend ? step(StepKind::Send, kInputBuffer, off, 0, 0, n, 0)
                                  : step(StepKind::Recv, 0, 0, kOutputBuffer, off, n, 0));
  }
}


void useConnections(LaneSpec* spec, const std::vector<Connection*>& send, const std::vector<Connection*>& recv) {
  spec->send = send.data();
  spec->nsend = send.size();
  spec->recv = recv.data();
  spec->nrecv = recv.size();
}

// The two trees each carry half of the elements, in up and down lanes.
ncclResult_t addTreeAllReduce(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec, LoweredBatch* set) {
  size_t half = roundUp(divUp(c.count, 2), plan.alignElems);
  for (int t = 0; t < 2; ++t) {
    const CommTree& tc = w.trees[t];
    size_t offset = std::min(c.count, t * half);
    size_t count = std::min(half, c.count - offset);
    ChannelSchedule* up = set->newSchedule();
    ChannelSchedule* down = set->newSchedule();
    buildTreeAllReduce({tc.parent >= 0, static_cast<int>(tc.children.size()), offset, count, plan.chunkElems}, up,
                       down);
    spec.channel = tc.id;
    if (tc.parent < 0) {
      useConnections(&spec, tc.downSend, tc.upRecv);
      set->add(spec, *up, &w);
    } else {
      useConnections(&spec, tc.upSend, tc.upRecv);
      set->add(spec, *up, &w);
      useConnections(&spec, tc.downSend, tc.downRecv);
      set->add(spec, *down, &w);
    }
  }
  return ncclSuccess;
}

// A one-lane schedule's connections: on two ranks channel 0's pair (its one
// connection each way is the only peer), else `send`/`recv` on `channel`.
void usePairOr(const Wiring& w, const std::vector<Connection*>& send, const std::vector<Connection*>& recv,
               int channel, LaneSpec* spec) {
  if (w.nranks == 2) {
    const Channel& ch = w.channels[0];
    useConnections(spec, ch.sendPtrs, ch.recvPtrs);
    spec->channel = ch.id;
  } else {
    useConnections(spec, send, recv);
    spec->channel = channel;
  }
}

// Recursive doubling: one lane. Its round-j partner is rank ^ 2^j; on two
// ranks that is the ring neighbour, so channel 0's connections serve and no
// doubling connections are made.
ncclResult_t addDoublingAllReduce(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec,
                                  LoweredBatch* set) {
  ChannelSchedule* sched = set->newSchedule();
  buildDoublingAllReduce({w.rank, w.nranks, 0, c.count, plan.chunkElems, plan.alignElems}, sched);
  usePairOr(w, w.doubling.send, w.doubling.recv, kDoublingChannelBase, &spec);
  set->add(spec, *sched, &w);
  return ncclSuccess;
}

// Direct: one lane over the mesh (peer p at meshIndex(rank, p)).
ncclResult_t addDirectCollective(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec,
                                 LoweredBatch* set) {
  ChannelSchedule* sched = set->newSchedule();
  DirectShape shape{w.rank, w.nranks, c.count, plan.chunkElems, c.root, isInPlace(c, w.rank)};
  if (c.coll == CollKind::Broadcast) buildDirectBroadcast(shape, sched);
  else if (c.coll == CollKind::AllGather) buildDirectAllGather(shape, sched);
  else if (c.coll == CollKind::AllReduce) buildDirectAllReduce(shape, sched);
  else if (c.coll == CollKind::ReduceScatter) buildDirectReduceScatter(shape, sched);
  else return fail(ncclInternalError, "%s has no direct schedule", collName(c.coll));
  useConnections(&spec, w.mesh.send, w.mesh.recv);
  spec.channel = kMeshChannelId;
  set->add(spec, *sched, &w);
  return ncclSuccess;
}

// A reduction whose operator scales each input first (PreMulSum, float
// average; integer average too, for one simple rule): the single-copy
// reduction reads peers' inputs as they are and cannot apply a peer's
// scalar, so these keep the plan's other algorithm. Every rank calls with
// the same operator, so all decide alike.
bool reducesWithPreOp(const CollCall& c) {
  if (c.coll != CollKind::AllReduce && c.coll != CollKind::ReduceScatter) return false;
  return c.op == ncclAvg || c.op >= ncclNumOps;
}

// Single copy: one lane over the mesh, or on two ranks over channel 0's
// pair (its one connection each way is the peer, at meshIndex 0).
ncclResult_t addSingleCopyCollective(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec,
                                     LoweredBatch* set) {
  ChannelSchedule* sched = set->newSchedule();
  const bool reduces = c.coll == CollKind::AllReduce || c.coll == CollKind::ReduceScatter;
  // By value, a piece must fit one FIFO slot.
  const bool oneSlot = reduces || plan.singleCopyByValue;
  size_t pieceElems = plan.chunkElems * (oneSlot ? kSingleCopyReduceStepsPerPiece : kSingleCopyStepsPerPiece);
  if (plan.singleCopyByValue && c.coll == CollKind::AllGather && w.nranks == 2)
    pieceElems = std::max(plan.alignElems, roundUp(pieceElems / kPairAllGatherPiecesPerSlot, plan.alignElems));
  DirectShape shape{w.rank, w.nranks, c.count, pieceElems, c.root, isInPlace(c, w.rank)};
  shape.byValueIfPrivate = plan.singleCopyByValue;
  if (c.coll == CollKind::Broadcast) buildSingleCopyBroadcast(shape, sched);
  else if (c.coll == CollKind::AllGather) buildSingleCopyAllGather(shape, sched);
  else if (c.coll == CollKind::ReduceScatter) buildSingleCopyReduceScatter(shape, sched);
  else if (c.coll == CollKind::AllReduce) buildSingleCopyAllReduce(shape, plan.alignElems, sched);
  else return fail(ncclInternalError, "%s has no single-copy schedule", collName(c.coll));
  usePairOr(w, w.mesh.send, w.mesh.recv, kMeshChannelId, &spec);
  set->add(spec, *sched, &w);
  return ncclSuccess;
}

// Channels split the elements into contiguous ranges. Each element's
// reduction order is that of its channel's ring, fixed for a given size and
// configuration, so every rank and every repeat gets the same bits.
ncclResult_t addRingCollective(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec, LoweredBatch* set) {
  for (int k = 0; k < plan.nchannels; ++k) {
    Segment range = splitSegment(0, c.count, plan.nchannels, k, plan.alignElems);
    if (range.count == 0) continue;
    ChannelSchedule* sched = set->newSchedule();
    const Channel& ch = w.channels[k];
    GYRE_CHECK(buildRingChannel(w, c, plan, ch, range.offset, range.count, sched));
    useConnections(&spec, ch.sendPtrs, ch.recvPtrs);
    spec.channel = ch.id;
    set->add(spec, *sched, &w);
  }
  return ncclSuccess;
}

// A collective's lanes, by the algorithm its plan picks.
ncclResult_t addCollective(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec, LoweredBatch* set) {
  GYRE_TRACE("COLL", "%s count %zu %s %s root %d: %s/%s", collName(c.coll), c.count, datatypeName(c.datatype),
             redOpName(c.op), c.root,
             plan.doubling ? "Doubling" : plan.singleCopy ? "SingleCopy" : algorithmName(plan.algorithm),
             protocolName(plan.protocol));
  if (plan.doubling) return addDoublingAllReduce(w, c, plan, spec, set);
  if (plan.singleCopy && !reducesWithPreOp(c)) return addSingleCopyCollective(w, c, plan, spec, set);
  if (plan.algorithm == Algorithm::Tree) return addTreeAllReduce(w, c, plan, spec, set);
  if (plan.algorithm == Algorithm::Direct) return addDirectCollective(w, c, plan, spec, set);
  return addRingCollective(w, c, plan, spec, set);
}

ncclResult_t addSendRecv(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec, LoweredBatch* set) {
  Connection* conn = (c.isSend ? w.p2pSend : w.p2pRecv).at(c.root).get();
  ChannelSchedule* sched = set->newSchedule();
  buildSendRecv(c, plan.chunkElems, sched);
  spec.single = conn;
  spec.channel = kP2PChannelId;
  spec.opCount = ++conn->callSeq;
  set->add(spec, *sched, conn);
  return ncclSuccess;
}

}  // namespace

ncclResult_t planCall(const Wiring& w, const CollCall& c, Plan* plan) {
  return planCollective(planContextOf(w), c.coll, c.count, datatypeSize(c.datatype), plan,
                        {c.allowedAlgorithms, c.algorithmsRequired});
}

LaneSpec baseSpec(const Wiring& w, const CollCall& c, bool withScalar) {
  LaneSpec spec;
  spec.rank = w.rank;
  spec.nranks = w.nranks;
  spec.coll = c.coll;
  spec.datatype = c.datatype;
  spec.op = c.op;
  spec.count = c.callCount ? c.callCount : c.count;
  spec.root = metaRootOf(c.coll, c.root);
  spec.buffers[kInputBuffer] = const_cast<void*>(c.input);
  spec.buffers[kOutputBuffer] = c.output;
  if (w.tuning)
    spec.streamingStores = collectiveBytes(c.coll, c.count, datatypeSize(c.datatype), w.nranks) >=
                           w.tuning->host.streamingStoresMinBytes;
  if (withScalar && c.scalar.present) {
    spec.hasScalar = true;
    const void* scalar = c.stagedScalar ? c.stagedScalar : c.scalar.devicePtr ? c.scalar.devicePtr : c.scalar.value;
    memcpy(spec.scalar, scalar, datatypeSize(c.datatype));
  }
  return spec;
}

ncclResult_t lowerCollective(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec, LoweredBatch* out) {
  return addCollective(w, c, plan, spec, out);
}

ncclResult_t lowerSendRecv(const Wiring& w, const CollCall& c, const Plan& plan, LaneSpec spec, LoweredBatch* out) {
  return addSendRecv(w, c, plan, spec, out);
}

bool runsSingleCopy(const CollCall& c, const Plan& plan) { return plan.singleCopy && !reducesWithPreOp(c); }

ncclResult_t collectiveLaneSpecs(const Wiring& w, const CollCall& call, std::vector<LaneSpec>* out, bool* ll) {
  Plan plan;
  GYRE_CHECK(planCall(w, call, &plan));
  *ll = plan.protocol == Protocol::LL;
  thread_local LoweredBatch batch;
  batch.reset();
  GYRE_CHECK(addCollective(w, call, plan, baseSpec(w, call, false), &batch));
  out->clear();
  for (const LoweredLane& l : batch.lanes()) out->push_back(l.spec);
  return ncclSuccess;
}

}  // namespace gyre
