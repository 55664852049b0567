#include "src/host/lane_trace.h"

#include <algorithm>
#include <cstdint>
#include <deque>

#include "src/call/datatypes.h"
#include "src/host/lane.h"
#include "src/transport/transport.h"

namespace gyre {
namespace {

// The receive connections a step takes a chunk from: its own, or every one
// (a step over all peers).
template <typename F>
void forEachReceive(const LaneSpec& spec, const Step& s, F f) {
  if (!stepReceives(s.kind)) return;
  if (s.flags & kStepAllPeers) {
    for (size_t i = 0; i < spec.nrecv; ++i) f(i);
  } else {
    f(s.recvConn);
  }
}

// Whether a step gets events: not a single-copy path's zero-byte
// acknowledgement, which the lane skips when nothing went by reference
// (known only as it runs), so that nSteps is what the plugin will see.
bool reported(const Step& s) { return !((s.flags & kStepByValueIfPrivate) && s.count == 0); }

}  // namespace

bool LaneTrace::open(const LaneSpec& spec, CommObserver* observer) {
  spec_ = &spec;
  observer_ = observer;
  at_ = SIZE_MAX;  // no step reached yet
  begun_ = false;
  open_.clear();
  const bool p2p = spec.coll == CollKind::SendRecv;
  const Connection* single = p2p && spec.nsend + spec.nrecv == 1 ? (spec.nsend ? spec.send[0] : spec.recv[0]) : nullptr;
  void* parent = stepev::laneParent(observer, p2p, spec.opCount, single ? single->peer : -1,
                                    single ? single->isSend : false);
  if (!parent) return false;
  sendOps_.assign(spec.nsend, Op{});
  recvOps_.assign(spec.nrecv, Op{});
  std::vector<size_t> sendChunk(spec.nsend, 0), recvChunk(spec.nrecv, 0);
  for (size_t k = 0; k < spec.nsteps; ++k) {
    const Step& s = spec.steps[k];
    if (!reported(s)) continue;
    const size_t bytes = bytesOf(k);
    if (stepSends(s.kind)) {
      ++sendOps_[s.sendConn].steps;
      sendChunk[s.sendConn] = std::max(sendChunk[s.sendConn], bytes);
    }
    forEachReceive(spec, s, [&](size_t i) {
      ++recvOps_[i].steps;
      recvChunk[i] = std::max(recvChunk[i], bytes);
    });
  }
  for (bool isSend : {true, false}) {
    std::vector<Op>& ops = isSend ? sendOps_ : recvOps_;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].steps == 0) continue;
      const Connection* c = (isSend ? spec.send : spec.recv)[i];
      const size_t chunk = (isSend ? sendChunk : recvChunk)[i];
      ops[i].handle = stepev::startOp(observer, parent, spec.channel, c->peer, isSend, ops[i].steps,
                                      static_cast<int>(std::min<size_t>(chunk, INT32_MAX)));
    }
  }
  return true;
}

size_t LaneTrace::bytesOf(size_t step) const { return size_t{spec_->steps[step].count} * datatypeSize(spec_->datatype); }

void LaneTrace::begin(Op& op, bool isSend) {
  const int number = op.started++;
  if (!op.handle) return;
  open_.push_back({&op, stepev::startStep(observer_, op.handle, number, isSend), isSend});
}

void LaneTrace::move(size_t next) {
  const size_t bytes = begun_ ? bytesOf(at_) : 0;
  for (const Open& o : open_) {
    stepev::endStep(o.step, o.isSend, bytes);
    if (o.op->started == o.op->steps && o.op->handle) {  // its last chunk: the operation is over
      stepev::stopOp(o.op->handle);
      o.op->handle = nullptr;
    }
  }
  open_.clear();
  at_ = next;
  begun_ = next < spec_->nsteps;
  if (!begun_) return;
  const Step& s = spec_->steps[next];
  if (!reported(s)) return;
  if (stepSends(s.kind)) begin(sendOps_[s.sendConn], true);
  forEachReceive(*spec_, s, [&](size_t i) { begin(recvOps_[i], false); });
}

void LaneTrace::close() {
  for (const Open& o : open_) stepev::endStep(o.step, o.isSend, 0);
  open_.clear();
  for (std::vector<Op>* ops : {&sendOps_, &recvOps_})
    for (Op& op : *ops)
      if (op.handle) {
        stepev::stopOp(op.handle);
        op.handle = nullptr;
      }
}

void LaneTraces::attach() {
  // Traces live as long as the thread: a run allocates them only when it has more lanes than any run before.
  thread_local std::deque<LaneTrace> pool;
  size_t used = 0;
  for (auto& lane : lanes_) {
    CommObserver* o = lane->comm()->observer;
    if (!stepev::wantsSteps(o)) continue;
    if (used == pool.size()) pool.emplace_back();
    LaneTrace& t = pool[used];
    if (!t.open(lane->spec(), o)) continue;
    lane->setTrace(&t);
    ++used;
    attached_ = true;
  }
}

void LaneTraces::detach() {
  for (auto& lane : lanes_)
    if (LaneTrace* t = lane->trace()) {
      t->close();
      lane->setTrace(nullptr);
    }
}

}  // namespace gyre
