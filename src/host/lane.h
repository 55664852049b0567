// A lane is one ordered list of steps over its own connections: one channel of
// a collective, or all sends to (or receives from) one peer in a group. The
// host executor interleaves many lanes in one thread, running each lane's next
// steps whenever they are ready and never blocking inside a lane, so channels
// overlap and a group of sends and receives cannot deadlock on ordering.
//
// TypedLane<T, Op> is the step loop for one element type and operator; the
// only virtual call is advance(), once per lane per pass, not per step or element.
#pragma once

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/primitives/reduce_copy.h"
#include "kernels/primitives/reduce_op.h"
#include "src/host/half_simd.h"
#include "src/comm/coll_kind.h"
#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/host/wait.h"

namespace gyre {

// Everything a lane needs, independent of element type.
struct LaneSpec {
  ncclComm* comm = nullptr;
  CollKind coll = CollKind::AllReduce;
  ncclDataType_t datatype = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  size_t count = 0;         // the call's count, stamped into SlotMeta for peer checks
  uint64_t opCount = 0;     // the call's sequence number (per connection for send/recv)
  int channel = 0;
  const Step* steps = nullptr;
  size_t nsteps = 0;
  Connection* const* send = nullptr;  // indexed by Step::sendConn
  Connection* const* recv = nullptr;  // indexed by Step::recvConn
  size_t nsend = 0;
  size_t nrecv = 0;
  void* buffers[2] = {nullptr, nullptr};  // kInputBuffer, kOutputBuffer
  // A send/recv lane has one connection: set this instead of send/recv and
  // the lane points its one-entry array at its own copy.
  Connection* single = nullptr;
  // A PreMulSum operator's scalar, as bytes of `datatype`.
  bool hasScalar = false;
  unsigned char scalar[8] = {};
};

class Lane {
 public:
  explicit Lane(const LaneSpec& spec) { bind(spec); }
  virtual ~Lane() = default;

  // Whether rebind(spec) may reuse this lane: the element type and operator
  // (baked into the typed loop) are the same. PreMulSum scalars are not compared, so
  // lanes with one are never reused.
  bool reusableFor(const LaneSpec& spec) const {
    return !spec.hasScalar && !spec_.hasScalar && spec.datatype == spec_.datatype && spec.op == spec_.op &&
           spec.comm->nranks == nranks_;  // ncclAvg scales by 1/nranks; spec_.comm may be gone by now
  }
  // Starts the lane over on a new call, keeping its allocations.
  void rebind(const LaneSpec& spec) {
    bind(spec);
    next_ = 0;
    before_.clear();
  }

  // Runs ready steps without waiting; *progressed tells whether any ran.
  virtual ncclResult_t advance(bool* progressed) = 0;

  bool done() const { return next_ == spec_.nsteps; }
  // This lane starts only once `before` is done: calls that share connections
  // (a communicator's channel, a peer's send queue) run in call order.
  void runAfter(const Lane* before) { before_.push_back(before); }
  bool waiting() const {
    for (const Lane* b : before_)
      if (!b->done()) return true;
    return false;
  }
  const LaneSpec& spec() const { return spec_; }
  size_t nextStep() const { return next_; }
  // The connection the next step waits on (for timeout messages), or null.
  Connection* blockingConnection() const;

 protected:
  LaneSpec spec_;
  size_t next_ = 0;
  std::vector<const Lane*> before_;

 private:
  int nranks_ = 0;
  void bind(const LaneSpec& spec) {
    spec_ = spec;
    nranks_ = spec.comm->nranks;
    if (spec_.single) {
      (spec_.single->isSend ? spec_.send : spec_.recv) = &spec_.single;
      (spec_.single->isSend ? spec_.nsend : spec_.nrecv) = 1;
    }
  }
};

// The F16C float16 loops (half_simd.h) for the operators they cover; false
// sends the caller to the portable loop.
template <typename Op>
bool reduceHalfFast(const Op&, bool, const Half*, const Half*, Half*, Half*, size_t) {
  return false;
}
inline bool reduceHalfFast(const OpSum<Half>&, bool, const Half* r, const Half* l, Half* d0, Half* d1, size_t n) {
  return halfReduceSimd(HalfSimdOp::Sum, r, l, d0, d1, n, nullptr);
}
inline bool reduceHalfFast(const OpProd<Half>&, bool, const Half* r, const Half* l, Half* d0, Half* d1, size_t n) {
  return halfReduceSimd(HalfSimdOp::Prod, r, l, d0, d1, n, nullptr);
}
inline bool reduceHalfFast(const OpPreMulSum<Half>& op, bool pre, const Half* r, const Half* l, Half* d0, Half* d1,
                           size_t n) {
  return halfReduceSimd(HalfSimdOp::Sum, r, l, d0, d1, n, pre ? &op.scalar : nullptr);
}

SlotMeta makeSlotMeta(const LaneSpec& spec, uint32_t bytes);
// Both ranks must run the same call with the same arguments; otherwise the
// bytes would be silently misinterpreted.
ncclResult_t checkSlotMeta(const LaneSpec& spec, const Connection& in, uint32_t expectedBytes);

template <typename T, typename Op>
class TypedLane final : public Lane {
 public:
  TypedLane(const LaneSpec& spec, Op op) : Lane(spec), op_(op) {}

  ncclResult_t advance(bool* progressed) override {
    if (waiting()) return ncclSuccess;
    while (next_ < spec_.nsteps) {
      const Step& s = spec_.steps[next_];
      Connection* in = stepReceives(s.kind) ? spec_.recv[s.recvConn] : nullptr;
      Connection* out = stepSends(s.kind) ? spec_.send[s.sendConn] : nullptr;
      if ((in && !recvDataReady(*in)) || (out && !sendSlotFree(*out))) return ncclSuccess;
      GYRE_CHECK(runStep(s, in, out));
      ++next_;
      *progressed = true;
    }
    return ncclSuccess;
  }

 private:
  ncclResult_t runStep(const Step& s, Connection* in, Connection* out) {
    T* const* buffers = reinterpret_cast<T* const*>(spec_.buffers);
    const T* src = buffers[s.srcBuffer] + s.srcOffset;
    T* dst = buffers[s.dstBuffer] + s.dstOffset;
    const bool pre = Op::kHasPre && (s.flags & kStepPreOp);
    const bool post = Op::kHasPost && (s.flags & kStepPostOp);
    const uint32_t bytes = static_cast<uint32_t>(s.count * sizeof(T));
    const T* received = nullptr;
    T* outgoing = nullptr;
    if (in) {
      GYRE_CHECK(checkSlotMeta(spec_, *in, bytes));
      received = reinterpret_cast<const T*>(in->fifo.slot(in->step));
    }
    if (out) outgoing = reinterpret_cast<T*>(out->fifo.slot(out->step));
    switch (s.kind) {
      case StepKind::Copy: copy(pre, post, src, dst, nullptr, s.count); break;
      case StepKind::Send: copy(pre, post, src, outgoing, nullptr, s.count); break;
      case StepKind::CopySend: copy(pre, post, src, dst, outgoing, s.count); break;
      case StepKind::Recv: copy(false, false, received, dst, nullptr, s.count); break;
      case StepKind::RecvCopySend: copy(false, false, received, dst, outgoing, s.count); break;
      case StepKind::RecvReduceSend: reduce(pre, post, received, src, outgoing, nullptr, s.count); break;
      case StepKind::RecvReduceCopySend: reduce(pre, post, received, src, dst, outgoing, s.count); break;
      case StepKind::RecvReduceCopy:
        if (s.flags & kStepLocalFirst) reduce<true>(pre, post, received, src, dst, nullptr, s.count);
        else reduce(pre, post, received, src, dst, nullptr, s.count);
        break;
    }
    if (out) {
      out->fifo.metaOf(out->step) = makeSlotMeta(spec_, bytes);
      storeRelease(out->fifo.tail, ++out->step);
    }
    if (in) storeRelease(in->fifo.head, ++in->step);
    return ncclSuccess;
  }

  void copy(bool pre, bool post, const T* src, T* dst0, T* dst1, size_t n) {
    if constexpr (std::is_same_v<Op, OpPreMulSum<Half>>)
      if (pre && !post && halfScaleSimd(src, dst0, dst1, n, op_.scalar)) return;
    if (pre && post) copyElements<T, Op, true, true>(op_, src, dst0, dst1, n);
    else if (pre) copyElements<T, Op, true, false>(op_, src, dst0, dst1, n);
    else if (post) copyElements<T, Op, false, true>(op_, src, dst0, dst1, n);
    else if (!dst1) memmove(dst0, src, n * sizeof(T));  // memmove: a Copy step may be in place
    else {
      // dst1 is a FIFO slot the peer read last: a fused two-store loop waits
      // for cache-line ownership line by line (out-of-place Broadcast and
      // AllGather ran 3x slower than in place); memcpy's string stores do not.
      memcpy(dst1, src, n * sizeof(T));
      memmove(dst0, src, n * sizeof(T));
    }
  }

  // LocalFirst: op(local, received) (kStepLocalFirst); float16 sum and
  // product commute bit for bit (NaNs are made canonical), so the F16C loop
  // serves both orders.
  template <bool LocalFirst = false>
  void reduce(bool pre, bool post, const T* received, const T* local, T* dst0, T* dst1, size_t n) {
    if constexpr (std::is_same_v<T, Half>)
      if (!post && reduceHalfFast(op_, pre, received, local, dst0, dst1, n)) return;
    if (pre && post) reduceElements<T, Op, true, true, LocalFirst>(op_, received, local, dst0, dst1, n);
    else if (pre) reduceElements<T, Op, true, false, LocalFirst>(op_, received, local, dst0, dst1, n);
    else if (post) reduceElements<T, Op, false, true, LocalFirst>(op_, received, local, dst0, dst1, n);
    else reduceElements<T, Op, false, false, LocalFirst>(op_, received, local, dst0, dst1, n);
  }

  Op op_;
};

}  // namespace gyre
