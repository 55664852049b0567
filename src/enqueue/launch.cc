#include "src/enqueue/launch.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/debug/thread_owned.h"
#include "src/comm/executor_binding.h"
#include "src/device/device_layer.h"
#include "src/device/runtime.h"
#include "src/enqueue/arg_checks.h"
#include "src/enqueue/p2p_connect.h"
#include "src/enqueue/repeat_call.h"
#include "src/host/executor.h"
#include "src/host/host_comm.h"
#include "src/plan/planner.h"
#include "src/sched/build_direct.h"
#include "src/sched/build_single_copy.h"
#include "src/sched/build_ring_allreduce.h"
#include "src/sched/build_ring_collectives.h"
#include "src/sched/build_tree_allreduce.h"
#include "src/sched/chunking.h"
#include "src/sched/step_builder.h"

namespace gyre {
namespace {

// Counts calls as in flight so ncclCommAbort waits for them to leave. Taken
// before the usability check: an abort that sets its flag after the check
// waits for the call to leave.
class ActiveCalls {
 public:
  ActiveCalls(ncclComm* const* comms, size_t n) : comms_(comms), n_(n) {
    for (size_t i = 0; i < n_; ++i) comms_[i]->activeCalls.fetch_add(1);
  }
  explicit ActiveCalls(const std::vector<ncclComm*>& comms) : ActiveCalls(comms.data(), comms.size()) {}
  ~ActiveCalls() {
    for (size_t i = 0; i < n_; ++i) comms_[i]->activeCalls.fetch_sub(1);
  }

 private:
  ncclComm* const* comms_;
  size_t n_;
};

ncclResult_t checkUsable(ncclComm* comm, CollKind coll) {
  pollDeviceStatus(comm->device.get(), /*queryStreams=*/false);  // a kernel that reported a failure since the last call
  if (comm->abortFlag.load()) return fail(ncclInvalidUsage, "%s: the communicator was aborted", collName(coll));
  if (comm->finalized.load())
    return fail(ncclInvalidUsage, "%s: the communicator was finalized (ncclCommFinalize); only ncclCommDestroy "
                                  "may follow", collName(coll));
  if (comm->suspended.load())
    return fail(ncclInvalidUsage, "%s: the communicator is suspended (ncclCommSuspend); call ncclCommResume first",
                collName(coll));
  if (comm->asyncError.load() == ncclInProgress)
    return fail(ncclInvalidUsage, "%s: the communicator is still initialising (nonblocking init); wait until "
                                  "ncclCommGetAsyncError stops returning ncclInProgress", collName(coll));
  if (int err = comm->asyncError.load(); err != ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    return fail(static_cast<ncclResult_t>(err), "%s: the communicator failed earlier: %s", collName(coll),
                comm->errorText.c_str());
  }
  return ncclSuccess;
}

// One channel's share of a ring collective: elements [begin, begin+count) of
// each block (the whole buffer for AllReduce, Broadcast and Reduce).
// Ring builders think in positions along the channel's ring, not rank numbers.
ncclResult_t buildRingChannel(const PendingCall& c, const Plan& plan, const Channel& ch, size_t begin, size_t count,
                              ChannelSchedule* out) {
  int rootPos = c.root >= 0 && c.root < c.comm->nranks ? ch.positionOf[c.root] : 0;
  bool inPlace = isInPlace(c, c.comm->rank);
  RingShape shape{ch.position, c.comm->nranks, c.count, plan.chunkElems, rootPos, inPlace, begin, count,
                  ch.ringRanks.data()};
  switch (c.coll) {
    case CollKind::AllReduce:
      buildRingAllReduce({ch.position, c.comm->nranks, begin, count, plan.chunkElems, plan.alignElems}, out);
      return ncclSuccess;
    case CollKind::Broadcast: buildRingBroadcast(shape, out); return ncclSuccess;
    case CollKind::Reduce: buildRingReduce(shape, out); return ncclSuccess;
    case CollKind::AllGather: buildRingAllGather(shape, out); return ncclSuccess;
    case CollKind::ReduceScatter: buildRingReduceScatter(shape, out); return ncclSuccess;
    case CollKind::SendRecv: break;
  }
  return fail(ncclInternalError, "%s has no schedule builder", collName(c.coll));
}

// Sends to self pair with receives from self in call order and are copies.
ncclResult_t copySelfMessages(const std::vector<PendingCall>& calls) {
  std::map<ncclComm*, std::vector<const PendingCall*>> sends, recvs;
  for (const PendingCall& c : calls)
    if (c.coll == CollKind::SendRecv && c.root == c.comm->rank) (c.isSend ? sends : recvs)[c.comm].push_back(&c);
  for (auto& [comm, list] : sends) {
    auto& matching = recvs[comm];
    for (size_t i = 0; i < std::max(list.size(), matching.size()); ++i) {
      if (i >= list.size() || i >= matching.size())
        return fail(ncclInvalidUsage, "rank %d: %zu ncclSend(s) to itself but %zu ncclRecv(s) from itself in one group",
                    comm->rank, list.size(), matching.size());
      size_t sb = list[i]->count * datatypeSize(list[i]->datatype);
      size_t rb = matching[i]->count * datatypeSize(matching[i]->datatype);
      if (sb != rb)
        return fail(ncclInvalidUsage, "rank %d: ncclSend to itself of %zu bytes meets an ncclRecv of %zu bytes",
                    comm->rank, sb, rb);
      if (sb) memmove(matching[i]->output, list[i]->input, sb);
    }
  }
  for (auto& [comm, list] : recvs)
    if (!list.empty() && sends[comm].size() != list.size())
      return fail(ncclInvalidUsage, "rank %d: %zu ncclRecv(s) from itself but %zu ncclSend(s) to itself in one group",
                  comm->rank, list.size(), sends[comm].size());
  return ncclSuccess;
}

void buildSendRecv(const PendingCall& c, size_t chunkElems, ChannelSchedule* out) {
  for (size_t off = 0; off < c.count; off += chunkElems) {
    size_t n = std::min(chunkElems, c.count - off);
    out->steps.push_back(c.isSend ? step(StepKind::Send, kInputBuffer, off, 0, 0, n, 0)
                                  : step(StepKind::Recv, 0, 0, kOutputBuffer, off, n, 0));
  }
}


// Lanes of one batch, and the order constraints between them. One set lives
// per thread and is reused batch after batch: schedules keep their step
// arrays, lanes are rebound (reuseHostLane), so a repeated call allocates
// nothing (small-message latency was dominated by malloc/free).
class LaneSet {
 public:
  // Starts a new batch; nothing of the previous one is referenced again.
  // Without host lanes, add() only collects the specs (for the device executor).
  void reset(bool hostLanes = true) {
    repeat = {};
    id_ = nextLaneSetId.fetch_add(1, std::memory_order_relaxed);
    hostLanes_ = hostLanes;
    specs_.clear();
    nschedules_ = 0;
    for (auto& l : lanes_) spare_.push_back(std::move(l));
    lanes_.clear();
    for (Order& o : order_) {
      o.key = nullptr;
      o.previous.clear();
      o.current.clear();
    }
  }

  // Storage for one lane's steps; stays put while the batch runs.
  ChannelSchedule* newSchedule() {
    if (nschedules_ == schedules_.size()) schedules_.push_back(std::make_unique<ChannelSchedule>());
    ChannelSchedule* s = schedules_[nschedules_++].get();
    s->steps.clear();
    return s;
  }

  ncclResult_t add(LaneSpec spec, HostComm* comm, const ChannelSchedule& steps, const void* orderKey) {
    spec.steps = steps.steps.data();
    spec.nsteps = steps.steps.size();
    if (!hostLanes_) {
      specs_.push_back(spec);
      return ncclSuccess;
    }
    std::unique_ptr<Lane> lane;
    if (!spare_.empty()) {
      lane = std::move(spare_.back());
      spare_.pop_back();
    }
    GYRE_CHECK(reuseHostLane(spec, comm, &lane));
    // A lane waits for every lane of the previous call on the same key.
    Order& o = orderFor(orderKey);
    for (const Lane* p : o.previous) lane->runAfter(p);
    o.current.push_back(lane.get());
    lanes_.push_back(std::move(lane));
    return ncclSuccess;
  }

  // Ends one call: its lanes become the predecessors for the next call.
  void endCall() {
    for (Order& o : order_)
      if (o.key && !o.current.empty()) {
        o.previous.swap(o.current);
        o.current.clear();
      }
  }

  std::vector<std::unique_ptr<Lane>>& lanes() { return lanes_; }
  // Names this batch's lanes until the next reset(), across all threads:
  // runLanes keeps what it derived from lanes of the same id.
  uint64_t id() const { return id_; }
  const std::vector<LaneSpec>& specs() const { return specs_; }

  // The lone call these lanes were built for (repeat_call.h); cleared by
  // reset(), so it names the lanes only while they are that call's.
  RepeatKey repeat;

 private:
  struct Order {
    const void* key = nullptr;  // a communicator (collectives) or a connection (send/recv)
    std::vector<const Lane*> previous, current;
  };

  // Few keys per batch (communicators and peers), so a linear scan.
  Order& orderFor(const void* key) {
    Order* unused = nullptr;
    for (Order& o : order_) {
      if (o.key == key) return o;
      if (!o.key && !unused) unused = &o;
    }
    if (!unused) unused = &order_.emplace_back();
    unused->key = key;
    return *unused;
  }

  std::vector<std::unique_ptr<ChannelSchedule>> schedules_;  // pointers: lanes point into their steps
  size_t nschedules_ = 0;
  std::vector<std::unique_ptr<Lane>> lanes_, spare_;
  std::vector<Order> order_;
  bool hostLanes_ = true;
  std::vector<LaneSpec> specs_;
  uint64_t id_ = 0;
  static inline std::atomic<uint64_t> nextLaneSetId{1};
};

// The thread's lanes, reached once per call (thread_owned.h).
LaneSet& threadLaneSet() {
  static __thread LaneSet* slot = nullptr;
  return threadOwned(slot);
}
thread_local std::vector<ncclComm*> tlsComms;

// `withScalar`: copy a PreMulSum operator's scalar into the spec (the host
// executor). The device executor takes it per call, and an ncclScalarDevice
// scalar must not be read on the host.
LaneSpec baseSpec(const PendingCall& c, bool withScalar = true) {
  LaneSpec spec;
  spec.rank = c.comm->rank;
  spec.nranks = c.comm->nranks;
  spec.coll = c.coll;
  spec.datatype = c.datatype;
  spec.op = c.op;
  spec.count = c.callCount ? c.callCount : c.count;
  spec.root = metaRootOf(c.coll, c.root);
  spec.buffers[kInputBuffer] = const_cast<void*>(c.input);
  spec.buffers[kOutputBuffer] = c.output;
  if (withScalar && c.scalar.present) {
    spec.hasScalar = true;
    const void* scalar = c.stagedScalar ? c.stagedScalar : c.scalar.devicePtr ? c.scalar.devicePtr : c.scalar.value;
    memcpy(spec.scalar, scalar, datatypeSize(c.datatype));
  }
  return spec;
}

void useConnections(LaneSpec* spec, const std::vector<Connection*>& send, const std::vector<Connection*>& recv) {
  spec->send = send.data();
  spec->nsend = send.size();
  spec->recv = recv.data();
  spec->nrecv = recv.size();
}

// The two trees each carry half of the elements, in up and down lanes.
ncclResult_t addTreeAllReduce(const PendingCall& c, const Plan& plan, LaneSpec spec, LaneSet* set) {
  size_t half = roundUp(divUp(c.count, 2), plan.alignElems);
  for (int t = 0; t < 2; ++t) {
    CommTree& tc = c.comm->trees[t];
    size_t offset = std::min(c.count, t * half);
    size_t count = std::min(half, c.count - offset);
    ChannelSchedule* up = set->newSchedule();
    ChannelSchedule* down = set->newSchedule();
    buildTreeAllReduce({tc.parent >= 0, static_cast<int>(tc.children.size()), offset, count, plan.chunkElems}, up,
                       down);
    spec.channel = tc.id;
    if (tc.parent < 0) {
      useConnections(&spec, tc.downSend, tc.upRecv);
      GYRE_CHECK(set->add(spec, c.comm->host.get(), *up, c.comm));
    } else {
      useConnections(&spec, tc.upSend, tc.upRecv);
      GYRE_CHECK(set->add(spec, c.comm->host.get(), *up, c.comm));
      useConnections(&spec, tc.downSend, tc.downRecv);
      GYRE_CHECK(set->add(spec, c.comm->host.get(), *down, c.comm));
    }
  }
  return ncclSuccess;
}

// A one-lane schedule's connections: on two ranks channel 0's pair (its one
// connection each way is the only peer), else `send`/`recv` on `channel`.
void usePairOr(const PendingCall& c, const std::vector<Connection*>& send, const std::vector<Connection*>& recv,
               int channel, LaneSpec* spec) {
  if (c.comm->nranks == 2) {
    const Channel& ch = c.comm->channels[0];
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
ncclResult_t addDoublingAllReduce(const PendingCall& c, const Plan& plan, LaneSpec spec, LaneSet* set) {
  ChannelSchedule* sched = set->newSchedule();
  buildDoublingAllReduce({c.comm->rank, c.comm->nranks, 0, c.count, plan.chunkElems, plan.alignElems}, sched);
  usePairOr(c, c.comm->doubling.send, c.comm->doubling.recv, kDoublingChannelBase, &spec);
  return set->add(spec, c.comm->host.get(), *sched, c.comm);
}

// Direct: one lane over the mesh (peer p at meshIndex(rank, p)).
ncclResult_t addDirectCollective(const PendingCall& c, const Plan& plan, LaneSpec spec, LaneSet* set) {
  ChannelSchedule* sched = set->newSchedule();
  DirectShape shape{c.comm->rank, c.comm->nranks, c.count, plan.chunkElems, c.root, isInPlace(c, c.comm->rank)};
  if (c.coll == CollKind::Broadcast) buildDirectBroadcast(shape, sched);
  else if (c.coll == CollKind::AllGather) buildDirectAllGather(shape, sched);
  else if (c.coll == CollKind::AllReduce) buildDirectAllReduce(shape, sched);
  else if (c.coll == CollKind::ReduceScatter) buildDirectReduceScatter(shape, sched);
  else return fail(ncclInternalError, "%s has no direct schedule", collName(c.coll));
  useConnections(&spec, c.comm->mesh.send, c.comm->mesh.recv);
  spec.channel = kMeshChannelId;
  return set->add(spec, c.comm->host.get(), *sched, c.comm);
}

// A reduction whose operator scales each input first (PreMulSum, float
// average; integer average too, for one simple rule): the single-copy
// reduction reads peers' inputs as they are and cannot apply a peer's
// scalar, so these keep the plan's other algorithm. Every rank calls with
// the same operator, so all decide alike.
bool reducesWithPreOp(const PendingCall& c) {
  if (c.coll != CollKind::AllReduce && c.coll != CollKind::ReduceScatter) return false;
  return c.op == ncclAvg || c.op >= ncclNumOps;
}

// What addCollective (or addSendRecv) runs the planned call as, for the counters.
ExecPath execPathOf(const PendingCall& c, const Plan& plan) {
  if (c.coll == CollKind::SendRecv) return ExecPath::PointToPoint;
  if (plan.doubling) return ExecPath::Doubling;
  if (plan.singleCopy && !reducesWithPreOp(c)) return ExecPath::SingleCopy;
  if (plan.algorithm == Algorithm::Tree) return ExecPath::Tree;
  if (plan.algorithm == Algorithm::Direct) return ExecPath::Direct;
  return ExecPath::Ring;
}

// Single copy: one lane over the mesh, or on two ranks over channel 0's
// pair (its one connection each way is the peer, at meshIndex 0).
ncclResult_t addSingleCopyCollective(const PendingCall& c, const Plan& plan, LaneSpec spec, LaneSet* set) {
  ChannelSchedule* sched = set->newSchedule();
  const bool reduces = c.coll == CollKind::AllReduce || c.coll == CollKind::ReduceScatter;
  // By value, a piece must fit one FIFO slot.
  const bool oneSlot = reduces || plan.singleCopyByValue;
  size_t pieceElems = plan.chunkElems * (oneSlot ? kSingleCopyReduceStepsPerPiece : kSingleCopyStepsPerPiece);
  DirectShape shape{c.comm->rank, c.comm->nranks, c.count, pieceElems, c.root, isInPlace(c, c.comm->rank)};
  shape.byValueIfPrivate = plan.singleCopyByValue;
  if (c.coll == CollKind::Broadcast) buildSingleCopyBroadcast(shape, sched);
  else if (c.coll == CollKind::AllGather) buildSingleCopyAllGather(shape, sched);
  else if (c.coll == CollKind::ReduceScatter) buildSingleCopyReduceScatter(shape, sched);
  else if (c.coll == CollKind::AllReduce) buildSingleCopyAllReduce(shape, plan.alignElems, sched);
  else return fail(ncclInternalError, "%s has no single-copy schedule", collName(c.coll));
  usePairOr(c, c.comm->mesh.send, c.comm->mesh.recv, kMeshChannelId, &spec);
  return set->add(spec, c.comm->host.get(), *sched, c.comm);
}

// Channels split the elements into contiguous ranges. Each element's
// reduction order is that of its channel's ring, fixed for a given size and
// configuration, so every rank and every repeat gets the same bits.
ncclResult_t addRingCollective(const PendingCall& c, const Plan& plan, LaneSpec spec, LaneSet* set) {
  for (int k = 0; k < plan.nchannels; ++k) {
    Segment range = splitSegment(0, c.count, plan.nchannels, k, plan.alignElems);
    if (range.count == 0) continue;
    ChannelSchedule* sched = set->newSchedule();
    Channel& ch = c.comm->channels[k];
    GYRE_CHECK(buildRingChannel(c, plan, ch, range.offset, range.count, sched));
    useConnections(&spec, ch.sendPtrs, ch.recvPtrs);
    spec.channel = ch.id;
    GYRE_CHECK(set->add(spec, c.comm->host.get(), *sched, c.comm));
  }
  return ncclSuccess;
}

// A collective's lanes, by the algorithm its plan picks.
ncclResult_t addCollective(const PendingCall& c, const Plan& plan, LaneSpec spec, LaneSet* set) {
  GYRE_TRACE("COLL", "%s count %zu %s %s root %d: %s/%s", collName(c.coll), c.count, datatypeName(c.datatype),
             redOpName(c.op), c.root,
             plan.doubling ? "Doubling" : plan.singleCopy ? "SingleCopy" : algorithmName(plan.algorithm),
             protocolName(plan.protocol));
  if (plan.doubling) return addDoublingAllReduce(c, plan, spec, set);
  if (plan.singleCopy && !reducesWithPreOp(c)) return addSingleCopyCollective(c, plan, spec, set);
  if (plan.algorithm == Algorithm::Tree) return addTreeAllReduce(c, plan, spec, set);
  if (plan.algorithm == Algorithm::Direct) return addDirectCollective(c, plan, spec, set);
  return addRingCollective(c, plan, spec, set);
}

ncclResult_t addSendRecv(const PendingCall& c, const Plan& plan, LaneSpec spec, LaneSet* set) {
  Connection* conn = (c.isSend ? c.comm->p2pSend : c.comm->p2pRecv).at(c.root).get();
  ChannelSchedule* sched = set->newSchedule();
  buildSendRecv(c, plan.chunkElems, sched);
  spec.single = conn;
  spec.channel = kP2PChannelId;
  spec.opCount = ++conn->callSeq;
  return set->add(spec, c.comm->host.get(), *sched, conn);
}

}  // namespace

ncclResult_t collectiveLaneSpecs(const PendingCall& call, std::vector<LaneSpec>* out, bool* ll) {
  Plan plan;
  GYRE_CHECK(planCollective(planContextOf(call.comm), call.coll, call.count, datatypeSize(call.datatype), &plan,
                            {call.allowedAlgorithms, call.algorithmsRequired}));
  *ll = plan.protocol == Protocol::LL;
  thread_local LaneSet set;
  set.reset(false);
  GYRE_CHECK(addCollective(call, plan, baseSpec(call, false), &set));
  *out = set.specs();
  return ncclSuccess;
}

ncclResult_t launchCalls(std::vector<PendingCall>& calls) {
  if (calls.empty()) return ncclSuccess;
  bool device = !calls.front().comm->isHost;
  for (const PendingCall& c : calls) {
    GYRE_CHECK(checkUsable(c.comm, c.coll));
    if (c.comm->isHost != !device)
      return fail(ncclInvalidUsage, "%s: one group mixes host-memory and device communicators", collName(c.coll));
  }
  if (!device) return runHostCalls(calls);
  thread_local std::vector<DeviceRequest> requests;  // reused: a lone call allocates nothing here
  requests.clear();
  for (const PendingCall& c : calls) {
    DeviceRequest& r = requests.emplace_back();
    static_cast<CollCall&>(r) = c;
    r.comm = c.comm->device.get();
  }
  GYRE_CHECK(launchDeviceCalls(requests));
  if (DeviceRuntime* rt = deviceRuntime(); rt && rt->synchronousForTests()) {
    for (const PendingCall& c : calls) GYRE_CHECK(rt->streamSynchronize(c.stream));
    for (const PendingCall& c : calls) GYRE_CHECK(checkUsable(c.comm, c.coll));
  }
  return ncclSuccess;
}

namespace {

bool isRepeat(const PendingCall& c, const LaneSet& set) {
  return set.repeat.commSerial != 0 && repeatable(c) && set.repeat == repeatKeyOf(c, c.comm->serial, c.comm->rank);
}

ncclResult_t restartRepeat(const PendingCall& c, LaneSet& set) {
  GYRE_TRACE("COLL", "%s count %zu %s %s root %d: the previous call's plan and steps", collName(c.coll), c.count,
             datatypeName(c.datatype), redOpName(c.op), c.root);
  const uint64_t opCount = ++c.comm->opCount;
  HostRunScope observedRun;
  observeRepeatedCall(c.comm->observer, c, opCount);
  for (auto& lane : set.lanes()) lane->restart(c.input, c.output, opCount);
  return runLanes(set.lanes(), set.id());
}

// A lone collective repeating the thread's last one (repeat_call.h): its
// lanes start over on this call's buffers and sequence number, with the
// plan and the steps the last call built, and the executor keeps what it
// derived from them (the lane set's id).
ncclResult_t runRepeat(const PendingCall& c, LaneSet& set) {
  ncclComm* comm = c.comm;
  ActiveCalls active(&comm, 1);
  GYRE_CHECK(checkUsable(comm, c.coll));
  return restartRepeat(c, set);
}

}  // namespace

ncclResult_t launchLoneCall(const PendingCall& call) {
  if (call.comm->isHost) {
    LaneSet& set = threadLaneSet();
    if (isRepeat(call, set)) return runRepeat(call, set);
  }
  thread_local std::vector<PendingCall> single;  // reused: a lone call allocates nothing
  single.assign(1, call);
  return launchCalls(single);
}

ncclResult_t runHostCalls(std::vector<PendingCall>& calls) {
  HostRunScope observedRun;  // the profiler events of these calls end when they return
  std::vector<ncclComm*>& comms = tlsComms;
  comms.clear();
  for (const PendingCall& c : calls)
    if (std::find(comms.begin(), comms.end(), c.comm) == comms.end()) comms.push_back(c.comm);
  ActiveCalls active(comms);
  ScopedLogRank logRank(comms.empty() ? -1 : comms[0]->rank);
  for (const PendingCall& c : calls) GYRE_CHECK(checkUsable(c.comm, c.coll));
  LaneSet& set = threadLaneSet();
  if (calls.size() == 1 && isRepeat(calls[0], set)) return restartRepeat(calls[0], set);
  GYRE_CHECK(copySelfMessages(calls));
  GYRE_CHECK(connectPeersFor(calls));

  // Collectives of one communicator run in call order (a later call may read
  // what an earlier one wrote); sends and receives are ordered per connection.
  set.reset();
  for (const PendingCall& c : calls) {
    if (c.count == 0) continue;
    bool p2p = c.coll == CollKind::SendRecv;
    if (p2p && c.root == c.comm->rank) continue;  // copied above
    Plan plan;
    GYRE_CHECK(planCollective(planContextOf(c.comm), c.coll, c.count, datatypeSize(c.datatype), &plan,
                              {c.allowedAlgorithms, c.algorithmsRequired}));
    LaneSpec spec = baseSpec(c);
    if (p2p) {
      GYRE_CHECK(addSendRecv(c, plan, spec, &set));
    } else {
      spec.opCount = ++c.comm->opCount;
      GYRE_CHECK(addCollective(c, plan, spec, &set));
    }
    observeHostCall(c.comm->observer, c, execPathOf(c, plan), protocolName(plan.protocol), plan.nchannels,
                    p2p ? 0 : c.comm->opCount);
    set.endCall();
  }
  if (set.lanes().empty()) return ncclSuccess;
  if (calls.size() == 1 && repeatable(calls[0]))
    set.repeat = repeatKeyOf(calls[0], calls[0].comm->serial, calls[0].comm->rank);
  return runLanes(set.lanes(), set.id());
}

}  // namespace gyre
