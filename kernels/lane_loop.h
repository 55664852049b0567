// The device executor's step loop, written once for the CUDA kernel
// (kernels/collective_kernel.cu: a thread block per lane) and its host
// emulation (kernels/host_emulation.cc: a thread per lane, used by the fake
// CUDA runtime so CI runs this exact loop). `Ctx` supplies what differs:
// which thread leads, block barriers, acquire/release on the FIFO counters,
// a clock, and the element loops (the CUDA one strides 16-byte vectors over
// the block's threads; the host one is the host executor's loop).
//
// Per step the leader waits until the step's receive slot is full and its
// send slot free, checks the peer's SlotMeta, the block agrees, every thread
// moves its share of the elements, the block syncs, and the leader publishes
// the send (meta, then tail) and frees the receive slot (head). Step counts
// of each connection are its FIFO counters: the sender is the only writer of
// tail and the receiver of head, so they persist across launches for free.
#pragma once

#include <cstdint>

#include "kernels/device_work.h"
#include "kernels/primitives/host_device.h"
#include "kernels/primitives/reduce_copy.h"

namespace gyre {

// How often a waiting leader looks at the abort word and the clock.
constexpr uint32_t kDeviceWaitCheckEvery = 1024;

template <typename Ctx>
GYRE_HOST_DEVICE void reportDeviceError(Ctx& ctx, const DeviceCall& call, const DeviceLane& lane, int32_t kind,
                                        int32_t peer, uint32_t step, bool waitingForData, const SlotMeta* seen) {
  DeviceStatus* st = call.status;
  if (!ctx.claimError(&st->error, kind)) return;  // the first failing lane tells the story
  st->peer = peer;
  st->channel = lane.channel;
  st->opCount = call.opCount;
  st->step = step;
  st->waitingForData = waitingForData ? 1 : 0;
  st->count = call.count;
  st->coll = call.coll;
  st->datatype = call.datatype;
  st->redop = call.metaRedop;
  if (seen) st->seen = *seen;
  ctx.fenceSystem();
}

// Spins until ready() or the call is aborted / timed out (then reports and
// returns false). Leader only.
template <typename Ctx, typename Ready>
GYRE_HOST_DEVICE bool waitUntil(Ctx& ctx, const DeviceCall& call, const DeviceLane& lane, Ready ready, int32_t peer,
                                uint32_t step, bool waitingForData) {
  uint64_t start = 0;
  for (uint32_t spins = 0; !ready(); ++spins) {
    if (spins % kDeviceWaitCheckEvery != kDeviceWaitCheckEvery - 1) continue;
    if (call.status->abort) {
      reportDeviceError(ctx, call, lane, kDeviceAborted, peer, step, waitingForData, nullptr);
      return false;
    }
    if (call.status->error != kDeviceOk) return false;  // another lane failed: the call is over
    uint64_t now = ctx.nowNs();
    if (start == 0) start = now;
    else if (now - start > call.timeoutNs) {
      reportDeviceError(ctx, call, lane, kDeviceTimeout, peer, step, waitingForData, nullptr);
      return false;
    }
    ctx.pause();
  }
  return true;
}

template <typename T, typename Op, typename Ctx>
GYRE_HOST_DEVICE void elementsOfStep(Ctx& ctx, const Op& op, const Step& s, const T* src, T* dst, const T* received,
                                     T* outgoing) {
  const bool pre = Op::kHasPre && (s.flags & kStepPreOp);
  const bool post = Op::kHasPost && (s.flags & kStepPostOp);
  const size_t n = s.count;
  switch (s.kind) {
    // The last argument: the source is a FIFO slot another block or GPU wrote.
    case StepKind::Copy: ctx.template copy<T, Op>(op, pre, post, src, dst, nullptr, n, false); break;
    case StepKind::Send: ctx.template copy<T, Op>(op, pre, post, src, outgoing, nullptr, n, false); break;
    case StepKind::CopySend: ctx.template copy<T, Op>(op, pre, post, src, dst, outgoing, n, false); break;
    case StepKind::Recv: ctx.template copy<T, Op>(op, false, false, received, dst, nullptr, n, true); break;
    case StepKind::RecvCopySend: ctx.template copy<T, Op>(op, false, false, received, dst, outgoing, n, true); break;
    case StepKind::RecvReduceSend:
      ctx.template reduce<T, Op, false>(op, pre, post, received, src, outgoing, nullptr, n);
      break;
    case StepKind::RecvReduceCopySend:
      ctx.template reduce<T, Op, false>(op, pre, post, received, src, dst, outgoing, n);
      break;
    case StepKind::RecvReduceCopy:
      if (s.flags & kStepLocalFirst) ctx.template reduce<T, Op, true>(op, pre, post, received, src, dst, nullptr, n);
      else ctx.template reduce<T, Op, false>(op, pre, post, received, src, dst, nullptr, n);
      break;
  }
}

GYRE_HOST_DEVICE bool sameCall(const SlotMeta& got, const DeviceCall& call) {
  return got.opCount == call.opCount && got.count == call.count && got.coll == call.coll &&
         got.datatype == call.datatype && got.redop == call.metaRedop;
}

// Runs one lane to the end; false when it stopped on an error (in status).
template <typename T, typename Op, typename Ctx>
GYRE_HOST_DEVICE bool runLane(Ctx& ctx, const DeviceCall& call, const DeviceLane& lane, const Op& op) {
  uint64_t inStep[kMaxLaneConns], outStep[kMaxLaneConns];
  for (int c = 0; c < lane.nrecv; ++c) inStep[c] = ctx.loadAcquire(lane.recv[c].head);
  for (int c = 0; c < lane.nsend; ++c) outStep[c] = ctx.loadAcquire(lane.send[c].tail);
  T* const* buffers = reinterpret_cast<T* const*>(call.buffers);
  for (uint32_t i = 0; i < lane.nsteps; ++i) {
    const Step s = lane.steps[i];
    const Fifo* in = stepReceives(s.kind) ? &lane.recv[s.recvConn] : nullptr;
    const Fifo* out = stepSends(s.kind) ? &lane.send[s.sendConn] : nullptr;
    const uint64_t inAt = in ? inStep[s.recvConn] : 0, outAt = out ? outStep[s.sendConn] : 0;
    const uint32_t bytes = static_cast<uint32_t>(s.count * sizeof(T));
    bool ok = true;
    if (ctx.leader()) {
      if (in) {
        ok = waitUntil(ctx, call, lane, [&] { return ctx.loadAcquire(in->tail) > inAt; }, lane.recvPeer[s.recvConn],
                       i, true);
        if (ok) {
          SlotMeta got = ctx.loadMeta(&in->metaOf(inAt));
          if (!sameCall(got, call) || got.bytes != bytes) {
            reportDeviceError(ctx, call, lane, kDeviceMismatch, lane.recvPeer[s.recvConn], i, true, &got);
            ok = false;
          }
        }
      }
      if (ok && out)
        ok = waitUntil(ctx, call, lane, [&] { return outAt - ctx.loadAcquire(out->head) < uint64_t(kFifoSlots); },
                       lane.sendPeer[s.sendConn], i, false);
    }
    if (!ctx.allAgree(ok)) return false;
    const T* src = buffers[s.srcBuffer] + s.srcOffset;
    T* dst = buffers[s.dstBuffer] + s.dstOffset;
    const T* received = in ? reinterpret_cast<const T*>(in->slot(inAt)) : nullptr;
    T* outgoing = out ? reinterpret_cast<T*>(out->slot(outAt)) : nullptr;
    elementsOfStep<T, Op>(ctx, op, s, src, dst, received, outgoing);
    ctx.sync();  // every thread's share is written (and its received share read)
    if (ctx.leader()) {
      if (out) {
        SlotMeta m{};
        m.opCount = call.opCount;
        m.count = call.count;
        m.bytes = bytes;
        m.coll = call.coll;
        m.datatype = call.datatype;
        m.redop = call.metaRedop;
        ctx.storeMeta(&out->metaOf(outAt), m);
        ctx.publish(out->tail, outAt + 1);
      }
      if (in) ctx.publish(in->head, inAt + 1);
    }
    if (in) ++inStep[s.recvConn];
    if (out) ++outStep[s.sendConn];
  }
  return true;
}

}  // namespace gyre
