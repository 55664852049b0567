// StepRunner<T, Op> executes steps for one element type and operator. It is
// a header so the type/op instantiations live in executor.cc's dispatch.
#pragma once

#include <cstring>

#include "kernels/primitives/reduce_copy.h"
#include "src/debug/error.h"
#include "src/host/executor.h"
#include "src/host/wait.h"

namespace gyre {

template <typename T, typename Op>
class StepRunner {
 public:
  StepRunner(ncclComm* comm, const CollCall& call, Channel& channel, Op op)
      : comm_(comm), call_(call), channel_(channel), op_(op) {
    buffers_[kInputBuffer] = const_cast<T*>(static_cast<const T*>(call.input));
    buffers_[kOutputBuffer] = static_cast<T*>(call.output);
  }

  ncclResult_t run(const Step* steps, size_t nsteps) {
    WaitSite site{call_.coll, call_.opCount, channel_.id, 0, nsteps};
    for (size_t i = 0; i < nsteps; ++i) {
      site.stepIndex = i;
      GYRE_CHECK(runStep(steps[i], site));
    }
    for (Connection& c : channel_.send) GYRE_CHECK(waitSendsDrained(comm_, c, site));
    return ncclSuccess;
  }

 private:
  ncclResult_t runStep(const Step& s, const WaitSite& site) {
    const T* src = buffers_[s.srcBuffer] + s.srcOffset;
    T* dst = buffers_[s.dstBuffer] + s.dstOffset;
    const bool pre = Op::kHasPre && (s.flags & kStepPreOp);
    const bool post = Op::kHasPost && (s.flags & kStepPostOp);
    Connection* in = nullptr;
    Connection* out = nullptr;
    const T* received = nullptr;
    T* outgoing = nullptr;
    if (stepReceives(s.kind)) {
      in = &channel_.recv[s.recvConn];
      GYRE_CHECK(waitRecvData(comm_, *in, site));
      GYRE_CHECK(checkMeta(*in, s, site));
      received = reinterpret_cast<const T*>(in->fifo.slot(in->step));
    }
    if (stepSends(s.kind)) {
      out = &channel_.send[s.sendConn];
      GYRE_CHECK(waitSendSlot(comm_, *out, site));
      outgoing = reinterpret_cast<T*>(out->fifo.slot(out->step));
    }
    switch (s.kind) {
      case StepKind::Copy: copy(pre, post, src, dst, nullptr, s.count); break;
      case StepKind::Send: copy(pre, post, src, outgoing, nullptr, s.count); break;
      case StepKind::Recv: copy(false, false, received, dst, nullptr, s.count); break;
      case StepKind::RecvCopySend: copy(false, false, received, dst, outgoing, s.count); break;
      case StepKind::RecvReduceSend: reduce(pre, post, received, src, outgoing, nullptr, s.count); break;
      case StepKind::RecvReduceCopySend: reduce(pre, post, received, src, dst, outgoing, s.count); break;
      case StepKind::RecvReduceCopy: reduce(pre, post, received, src, dst, nullptr, s.count); break;
    }
    if (out) {
      SlotMeta& m = out->fifo.metaOf(out->step);
      m = stepMeta();
      m.bytes = static_cast<uint32_t>(s.count * sizeof(T));
      storeRelease(out->fifo.tail, ++out->step);
    }
    if (in) storeRelease(in->fifo.head, ++in->step);
    return ncclSuccess;
  }

  SlotMeta stepMeta() const {
    SlotMeta m{};
    m.opCount = call_.opCount;
    m.count = call_.count;
    m.coll = static_cast<uint8_t>(call_.coll);
    m.datatype = static_cast<uint8_t>(call_.datatype);
    m.redop = static_cast<uint8_t>(call_.op < ncclNumOps ? call_.op : 0xff);
    return m;
  }

  // Both ranks must be in the same call with the same arguments; otherwise
  // the bytes would be silently misinterpreted.
  ncclResult_t checkMeta(const Connection& in, const Step& s, const WaitSite& site) {
    const SlotMeta& got = in.fifo.metaOf(in.step);
    SlotMeta want = stepMeta();
    if (got.opCount != want.opCount || got.coll != want.coll || got.count != want.count ||
        got.datatype != want.datatype || got.redop != want.redop) {
      ncclResult_t r = fail(ncclInvalidUsage,
                            "mismatched collectives: rank %d sent data for %s #%llu (count %llu, datatype %d, op %d) "
                            "while this rank is in %s #%llu (count %llu, datatype %d, op %d)",
                            in.peer, collName(static_cast<CollKind>(got.coll)),
                            static_cast<unsigned long long>(got.opCount), static_cast<unsigned long long>(got.count),
                            got.datatype, got.redop, collName(site.coll), static_cast<unsigned long long>(want.opCount),
                            static_cast<unsigned long long>(want.count), want.datatype, want.redop);
      markCommFailed(comm_, r, in.peer);
      return r;
    }
    if (got.bytes != s.count * sizeof(T)) {
      ncclResult_t r = fail(ncclInternalError, "%s #%llu: rank %d sent %u bytes for a %zu-byte step",
                            collName(site.coll), static_cast<unsigned long long>(want.opCount), in.peer, got.bytes,
                            static_cast<size_t>(s.count * sizeof(T)));
      markCommFailed(comm_, r, in.peer);
      return r;
    }
    return ncclSuccess;
  }

  void copy(bool pre, bool post, const T* src, T* dst0, T* dst1, size_t n) {
    if (pre && post) copyElements<T, Op, true, true>(op_, src, dst0, dst1, n);
    else if (pre) copyElements<T, Op, true, false>(op_, src, dst0, dst1, n);
    else if (post) copyElements<T, Op, false, true>(op_, src, dst0, dst1, n);
    else if (!dst1) memcpy(dst0, src, n * sizeof(T));
    else copyElements<T, Op, false, false>(op_, src, dst0, dst1, n);
  }

  void reduce(bool pre, bool post, const T* received, const T* local, T* dst0, T* dst1, size_t n) {
    if (pre && post) reduceElements<T, Op, true, true>(op_, received, local, dst0, dst1, n);
    else if (pre) reduceElements<T, Op, true, false>(op_, received, local, dst0, dst1, n);
    else if (post) reduceElements<T, Op, false, true>(op_, received, local, dst0, dst1, n);
    else reduceElements<T, Op, false, false>(op_, received, local, dst0, dst1, n);
  }

  ncclComm* comm_;
  const CollCall& call_;
  Channel& channel_;
  Op op_;
  T* buffers_[2];
};

}  // namespace gyre
