#include "src/host/run_calls.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/debug/thread_owned.h"
#include "src/host/executor.h"
#include "src/host/p2p_connect.h"
#include "src/host/repeat_call.h"
#include "src/lower/lower.h"
#include "src/observe/observer.h"

namespace gyre {
namespace {

// Host lanes of one batch, made from the lowered specs, and the order
// constraints between them. One set lives per thread and is reused batch
// after batch: lanes are rebound (reuseHostLane), so a repeated call
// allocates nothing.
class HostLaneSet {
 public:
  // Starts a new batch; nothing of the previous one is referenced again.
  void reset() {
    repeat = {};
    id_ = nextLaneSetId.fetch_add(1, std::memory_order_relaxed);
    lowered.reset();
    made_ = 0;
    for (auto& l : lanes_) spare_.push_back(std::move(l));
    lanes_.clear();
    for (Order& o : order_) {
      o.key = nullptr;
      o.previous.clear();
      o.current.clear();
    }
  }

  // Makes host lanes of the specs lowered since the last call, then ends the
  // call: its lanes become the predecessors for the next call on each key.
  ncclResult_t makeCallLanes(HostComm* comm) {
    const std::vector<LoweredLane>& specs = lowered.lanes();
    for (; made_ < specs.size(); ++made_) {
      std::unique_ptr<Lane> lane;
      if (!spare_.empty()) {
        lane = std::move(spare_.back());
        spare_.pop_back();
      }
      GYRE_CHECK(reuseHostLane(specs[made_].spec, comm, &lane));
      // A lane waits for every lane of the previous call on the same key.
      Order& o = orderFor(specs[made_].orderKey);
      for (const Lane* p : o.previous) lane->runAfter(p);
      o.current.push_back(lane.get());
      lanes_.push_back(std::move(lane));
    }
    for (Order& o : order_)
      if (o.key && !o.current.empty()) {
        o.previous.swap(o.current);
        o.current.clear();
      }
    return ncclSuccess;
  }

  std::vector<std::unique_ptr<Lane>>& lanes() { return lanes_; }
  // Names this batch's lanes until the next reset(), across all threads:
  // runLanes keeps what it derived from lanes of the same id.
  uint64_t id() const { return id_; }

  LoweredBatch lowered;  // this batch's specs; their steps back the lanes
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

  size_t made_ = 0;  // lowered specs that have their lane
  std::vector<std::unique_ptr<Lane>> lanes_, spare_;
  std::vector<Order> order_;
  uint64_t id_ = 0;
  static inline std::atomic<uint64_t> nextLaneSetId{1};
};

// The thread's lanes, reached once per call (thread_owned.h).
HostLaneSet& threadLaneSet() {
  static __thread HostLaneSet* slot = nullptr;
  return threadOwned(slot);
}

// Sends to self pair with receives from self in call order and are copies.
ncclResult_t copySelfMessages(const std::vector<HostCall>& calls) {
  std::map<HostComm*, std::vector<const HostCall*>> sends, recvs;
  for (const HostCall& c : calls)
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

// What the lowered call runs as, for the counters.
ExecPath execPathOf(const CollCall& c, const Plan& plan) {
  if (c.coll == CollKind::SendRecv) return ExecPath::PointToPoint;
  if (plan.doubling) return ExecPath::Doubling;
  if (runsSingleCopy(c, plan)) return ExecPath::SingleCopy;
  if (plan.algorithm == Algorithm::Tree) return ExecPath::Tree;
  if (plan.algorithm == Algorithm::Direct) return ExecPath::Direct;
  return ExecPath::Ring;
}

// A communicator with a tuner plugin asks it on every call, as NCCL does (a
// plugin may answer differently over time), so nothing repeats there.
bool isRepeat(const CollCall& c, const HostComm& comm, const HostLaneSet& set) {
  return set.repeat.commSerial != 0 && !(comm.wiring && comm.wiring->tuner) && repeatable(c) && set.repeat == repeatKeyOf(c, comm.serial, comm.rank);
}

// The previous call's lanes start over on this call's buffers and sequence
// number, with the plan and the steps that call built, and the executor
// keeps what it derived from them (the lane set's id).
ncclResult_t restartRepeat(const CollCall& c, HostComm* comm, HostLaneSet& set) {
  GYRE_TRACE("COLL", "%s count %zu %s %s root %d: the previous call's plan and steps", collName(c.coll), c.count,
             datatypeName(c.datatype), redOpName(c.op), c.root);
  const uint64_t opCount = ++*comm->opCount;
  HostRunScope observedRun;
  observeRepeatedCall(*comm->observer, c, opCount);
  for (auto& lane : set.lanes()) lane->restart(c.input, c.output, opCount);
  return runLanes(set.lanes(), set.id());
}

}  // namespace

bool repeatsLastCall(const CollCall& call, const HostComm& comm) { return isRepeat(call, comm, threadLaneSet()); }

ncclResult_t rerunLastCall(const CollCall& call, HostComm* comm) { return restartRepeat(call, comm, threadLaneSet()); }

ncclResult_t runHostCalls(const std::vector<HostCall>& calls) {
  HostRunScope observedRun;  // the profiler events of these calls end when they return
  HostLaneSet& set = threadLaneSet();
  if (calls.size() == 1 && isRepeat(calls[0], *calls[0].comm, set)) return restartRepeat(calls[0], calls[0].comm, set);
  GYRE_CHECK(copySelfMessages(calls));
  GYRE_CHECK(connectPeersFor(calls));

  // Collectives of one communicator run in call order (a later call may read
  // what an earlier one wrote); sends and receives are ordered per connection.
  set.reset();
  for (const HostCall& c : calls) {
    if (c.count == 0) continue;
    bool p2p = c.coll == CollKind::SendRecv;
    if (p2p && c.root == c.comm->rank) continue;  // copied above
    const Wiring& w = *c.comm->wiring;
    Plan plan;
    GYRE_CHECK(planCall(w, c, &plan));
    LaneSpec spec = baseSpec(w, c);
    if (p2p) {
      GYRE_CHECK(lowerSendRecv(w, c, plan, spec, &set.lowered));
    } else {
      spec.opCount = ++*c.comm->opCount;
      GYRE_CHECK(lowerCollective(w, c, plan, spec, &set.lowered));
    }
    GYRE_CHECK(set.makeCallLanes(c.comm));
    observeHostCall(*c.comm->observer, c, execPathOf(c, plan), protocolName(plan.protocol), plan.nchannels,
                    p2p ? 0 : *c.comm->opCount);
  }
  if (set.lanes().empty()) return ncclSuccess;
  if (calls.size() == 1 && repeatable(calls[0]))
    set.repeat = repeatKeyOf(calls[0], calls[0].comm->serial, calls[0].comm->rank);
  return runLanes(set.lanes(), set.id());
}

}  // namespace gyre
