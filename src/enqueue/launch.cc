#include "src/enqueue/launch.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"
#include "src/enqueue/p2p_connect.h"
#include "src/host/executor.h"
#include "src/plan/planner.h"
#include "src/sched/build_ring_allreduce.h"
#include "src/sched/build_ring_collectives.h"
#include "src/sched/step_builder.h"

namespace gyre {
namespace {

// Counts calls as in flight so ncclCommAbort waits for them to leave.
class ActiveCalls {
 public:
  explicit ActiveCalls(const std::vector<ncclComm*>& comms) : comms_(comms) {
    for (ncclComm* c : comms_) c->activeCalls.fetch_add(1);
  }
  ~ActiveCalls() {
    for (ncclComm* c : comms_) c->activeCalls.fetch_sub(1);
  }

 private:
  std::vector<ncclComm*> comms_;
};

bool isInPlace(const PendingCall& c) {
  size_t bytes = c.count * datatypeSize(c.datatype);
  switch (c.coll) {
    case CollKind::AllGather:
      return static_cast<const char*>(c.input) == static_cast<char*>(c.output) + c.comm->rank * bytes;
    default: return c.input == c.output;
  }
}

ncclResult_t checkUsable(ncclComm* comm, CollKind coll) {
  if (comm->abortFlag.load()) return fail(ncclInvalidUsage, "%s: the communicator was aborted", collName(coll));
  if (int err = comm->asyncError.load(); err != ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    return fail(static_cast<ncclResult_t>(err), "%s: the communicator failed earlier: %s", collName(coll),
                comm->errorText.c_str());
  }
  if (!comm->isHost)
    return fail(ncclInvalidUsage, "%s: collectives on device communicators are not available in this build yet; "
                                  "create the communicator with gyreCommInitRankHost and pass host buffers",
                collName(coll));
  return ncclSuccess;
}

ncclResult_t buildCollective(const PendingCall& c, const Plan& plan, ChannelSchedule* out) {
  RingShape shape{c.comm->rank, c.comm->nranks, c.count, plan.chunkElems, c.root, isInPlace(c)};
  switch (c.coll) {
    case CollKind::AllReduce:
      buildRingAllReduce({c.comm->rank, c.comm->nranks, c.count, plan.chunkElems, plan.alignElems}, out);
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

}  // namespace

ncclResult_t launchCalls(std::vector<PendingCall>& calls) {
  std::vector<ncclComm*> comms;
  for (const PendingCall& c : calls)
    if (std::find(comms.begin(), comms.end(), c.comm) == comms.end()) comms.push_back(c.comm);
  ActiveCalls active(comms);
  for (const PendingCall& c : calls) GYRE_CHECK(checkUsable(c.comm, c.coll));
  GYRE_CHECK(copySelfMessages(calls));
  GYRE_CHECK(connectPeersFor(calls));

  std::vector<ChannelSchedule> schedules(calls.size());  // sized once: lanes point into it
  std::vector<std::unique_ptr<Lane>> lanes;
  std::map<const void*, const Lane*> lastLaneOn;  // per channel or connection: calls on it run in order
  for (size_t i = 0; i < calls.size(); ++i) {
    const PendingCall& c = calls[i];
    if (c.count == 0) continue;
    bool p2p = c.coll == CollKind::SendRecv;
    if (p2p && c.root == c.comm->rank) continue;  // copied above
    size_t typeSize = datatypeSize(c.datatype);
    Plan plan;
    GYRE_CHECK(planCollective(c.comm, c.coll, c.count, typeSize, &plan));
    LaneSpec spec;
    spec.comm = c.comm;
    spec.coll = c.coll;
    spec.datatype = c.datatype;
    spec.op = c.op;
    spec.count = c.count;
    spec.buffers[kInputBuffer] = const_cast<void*>(c.input);
    spec.buffers[kOutputBuffer] = c.output;
    const void* orderKey;
    if (p2p) {
      Connection* conn = (c.isSend ? c.comm->p2pSend : c.comm->p2pRecv).at(c.root).get();
      buildSendRecv(c, plan.chunkElems, &schedules[i]);
      spec.single = conn;
      spec.channel = kP2PChannelId;
      spec.opCount = ++conn->callSeq;
      orderKey = conn;
    } else {
      GYRE_CHECK(buildCollective(c, plan, &schedules[i]));
      Channel& ch = c.comm->channels[0];
      spec.send = ch.sendPtrs.data();
      spec.recv = ch.recvPtrs.data();
      spec.nsend = ch.sendPtrs.size();
      spec.nrecv = ch.recvPtrs.size();
      spec.channel = ch.id;
      spec.opCount = ++c.comm->opCount;
      orderKey = &ch;
    }
    spec.steps = schedules[i].steps.data();
    spec.nsteps = schedules[i].steps.size();
    GYRE_TRACE("COLL", "%s #%llu count %zu %s %s root/peer %d: %s/%s, %zu steps", collName(c.coll),
               static_cast<unsigned long long>(spec.opCount), c.count, datatypeName(c.datatype), redOpName(c.op),
               c.root, algorithmName(plan.algorithm), protocolName(plan.protocol), spec.nsteps);
    std::unique_ptr<Lane> lane;
    GYRE_CHECK(makeHostLane(spec, &lane));
    if (auto it = lastLaneOn.find(orderKey); it != lastLaneOn.end()) lane->runAfter(it->second);
    lastLaneOn[orderKey] = lane.get();
    lanes.push_back(std::move(lane));
  }
  if (lanes.empty()) return ncclSuccess;
  return runLanes(lanes);
}

}  // namespace gyre
