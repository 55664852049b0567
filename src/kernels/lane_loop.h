// The device executor's step loop, written once for the CUDA kernel
// (src/kernels/collective_kernel.cu: a thread block per lane) and its host
// emulation (tests/support/fake_cuda/host_emulation.cc: a thread per lane,
// in the tests' fake CUDA runtime, so CI runs this exact loop). `Ctx` supplies what differs:
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
#include <cstring>

#include "src/kernels/device_work.h"
#include "src/kernels/primitives/op_dispatch.h"
#include "src/kernels/primitives/host_device.h"
#include "src/kernels/primitives/shared_words.h"
#include "src/kernels/primitives/reduce_copy.h"

namespace gyre {

// How often a waiting leader looks at the abort word and the clock.
constexpr uint32_t kDeviceWaitCheckEvery = 1024;

template <typename Ctx>
GYRE_HOST_DEVICE void reportDeviceError(Ctx& ctx, const DeviceCall& call, const DeviceLane& lane, int32_t kind,
                                        int32_t peer, uint32_t step, bool waitingForData, const SlotMeta* seen) {
  DeviceStatus* st = call.status;
  // The first failing lane tells the story. It claims the report, fills it
  // in and publishes the error word last: the host and the other lanes poll
  // that word and read the fields as soon as they see it.
  if (!ctx.claimError(&st->reporter, kind)) return;
  st->peer = peer;
  st->channel = lane.channel;
  st->opCount = call.opCount;
  st->step = step;
  st->waitingForData = waitingForData ? 1 : 0;
  st->count = call.count;
  st->coll = call.coll;
  st->datatype = call.datatype;
  st->redop = call.metaRedop;
  st->root = call.root;
  if (seen) st->seen = *seen;
  ctx.fenceSystem();
  storeSharedWord(&st->error, kind);
}

// Spins until ready() or the call is aborted / timed out (then reports and
// returns false). Leader only.
template <typename Ctx, typename Ready>
GYRE_HOST_DEVICE bool waitUntil(Ctx& ctx, const DeviceCall& call, const DeviceLane& lane, Ready ready, int32_t peer,
                                uint32_t step, bool waitingForData) {
  uint64_t start = 0;
  for (uint32_t spins = 0; !ready(); ++spins) {
    if (spins % kDeviceWaitCheckEvery != kDeviceWaitCheckEvery - 1) continue;
    if (loadSharedWord(&call.status->abort)) {
      reportDeviceError(ctx, call, lane, kDeviceAborted, peer, step, waitingForData, nullptr);
      return false;
    }
    if (loadSharedWord(&call.status->error) != kDeviceOk) return false;  // another lane failed: the call is over
    if (peer >= 0 && loadSharedWord(call.peerGone + peer)) {
      reportDeviceError(ctx, call, lane, kDevicePeerGone, peer, step, waitingForData, nullptr);
      return false;
    }
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

// What this rank's sends say about the call (checked by the receiver).
GYRE_HOST_DEVICE SlotMeta slotMetaOf(const DeviceCall& call, uint32_t bytes) {
  SlotMeta m{};
  m.opCount = static_cast<uint32_t>(call.opCount);
  m.root = call.root;
  m.count = call.count;
  m.bytes = bytes;
  m.coll = call.coll;
  m.datatype = call.datatype;
  m.redop = call.metaRedop;
  return m;
}

GYRE_HOST_DEVICE bool sameCall(const SlotMeta& got, const DeviceCall& call) {
  return got.opCount == static_cast<uint32_t>(call.opCount) && got.count == call.count && got.coll == call.coll &&
         got.datatype == call.datatype && got.redop == call.metaRedop && got.root == call.root;
}

// One element of an LL step with runtime pre/post flags, through the same
// per-element primitives as every other loop.
template <typename T, typename Op>
GYRE_HOST_DEVICE T copyWith(const Op& op, bool pre, bool post, T v) {
  if (pre && post) return copyOne<T, Op, true, true>(op, v);
  if (pre) return copyOne<T, Op, true, false>(op, v);
  if (post) return copyOne<T, Op, false, true>(op, v);
  return v;
}
template <typename T, typename Op, bool LocalFirst>
GYRE_HOST_DEVICE T reduceWith(const Op& op, bool pre, bool post, T received, T local) {
  if (pre && post) return reduceOne<T, Op, true, true, LocalFirst>(op, received, local);
  if (pre) return reduceOne<T, Op, true, false, LocalFirst>(op, received, local);
  if (post) return reduceOne<T, Op, false, true, LocalFirst>(op, received, local);
  return reduceOne<T, Op, false, false, LocalFirst>(op, received, local);
}

GYRE_HOST_DEVICE bool stepReadsLocal(StepKind k) {
  return k == StepKind::Send || k == StepKind::CopySend || k == StepKind::RecvReduceSend ||
         k == StepKind::RecvReduceCopySend || k == StepKind::RecvReduceCopy;
}
GYRE_HOST_DEVICE bool stepWritesOutput(StepKind k) {
  return k == StepKind::CopySend || k == StepKind::Recv || k == StepKind::RecvCopySend ||
         k == StepKind::RecvReduceCopySend || k == StepKind::RecvReduceCopy;
}

// Waits for one LL unit of `flag` (any thread); false on abort or timeout.
template <typename Ctx>
GYRE_HOST_DEVICE bool pollUnit(Ctx& ctx, const DeviceCall& call, const DeviceLane& lane, const char* unit,
                               uint32_t flag, uint64_t* payload, int32_t peer, uint32_t step) {
  return waitUntil(ctx, call, lane, [&] { return ctx.llLoad(unit, flag, payload); }, peer, step, true);
}

// One step of the LL protocol. The data carries its own flags (the
// connection's step number + 1), so a receiver reads each unit as soon as it
// lands instead of waiting for tail and a block barrier. The SlotMeta rides
// in the slot's first units and is checked before any thread waits for data.
// tail and head still advance per step: they are the connection's step
// counters, and head is the sender's flow control.
template <typename T, typename Op, typename Ctx>
GYRE_HOST_DEVICE bool runLLStep(Ctx& ctx, const DeviceCall& call, const DeviceLane& lane, const Op& op, const Step& s,
                                uint32_t i, const Fifo* in, uint64_t inAt, const Fifo* out, uint64_t outAt,
                                const T* src, T* dst) {
  constexpr size_t E = kLLUnitPayload / sizeof(T);
  const bool pre = Op::kHasPre && (s.flags & kStepPreOp);
  const bool post = Op::kHasPost && (s.flags & kStepPostOp);
  const bool localFirst = (s.flags & kStepLocalFirst) != 0;
  const uint32_t bytes = static_cast<uint32_t>(s.count * sizeof(T));
  const uint32_t inFlag = static_cast<uint32_t>(inAt + 1), outFlag = static_cast<uint32_t>(outAt + 1);
  const int32_t inPeer = in ? lane.recvPeer[s.recvConn] : -1;
  bool ok = true;
  if (ctx.leader()) {
    if (out)
      ok = waitUntil(ctx, call, lane, [&] { return outAt - ctx.loadAcquire(out->head) < uint64_t(kFifoSlots); },
                     lane.sendPeer[s.sendConn], i, false);
    if (ok && in) {
      uint64_t words[kLLMetaUnits];
      for (size_t k = 0; ok && k < kLLMetaUnits; ++k)
        ok = pollUnit(ctx, call, lane, in->llSlot(inAt) + k * kLLUnitBytes, inFlag, &words[k], inPeer, i);
      if (ok) {
        SlotMeta got;
        memcpy(&got, words, sizeof(got));
        if (!sameCall(got, call) || got.bytes != bytes) {
          reportDeviceError(ctx, call, lane, kDeviceMismatch, inPeer, i, true, &got);
          ok = false;
        }
      }
    }
  }
  if (!ctx.allAgree(ok)) return false;
  const char* inUnits = in ? in->llSlot(inAt) + kLLMetaUnits * kLLUnitBytes : nullptr;
  char* outUnits = out ? out->llSlot(outAt) + kLLMetaUnits * kLLUnitBytes : nullptr;
  const size_t units = (s.count + E - 1) / E;
  for (size_t u = ctx.tid(); ok && u < units; u += ctx.nthreads()) {
    const size_t first = u * E;
    const size_t valid = s.count - first < E ? s.count - first : E;
    T received[E] = {}, value[E] = {};
    if (in) {
      uint64_t payload = 0;
      ok = pollUnit(ctx, call, lane, inUnits + u * kLLUnitBytes, inFlag, &payload, inPeer, i);
      if (!ok) break;
      memcpy(received, &payload, sizeof(received));
    }
    for (size_t j = 0; j < valid; ++j) {
      const T local = stepReadsLocal(s.kind) ? src[first + j] : T{};
      if (!in) value[j] = copyWith<T, Op>(op, pre, post, local);
      else if (s.kind == StepKind::Recv || s.kind == StepKind::RecvCopySend) value[j] = received[j];
      else if (localFirst) value[j] = reduceWith<T, Op, true>(op, pre, post, received[j], local);
      else value[j] = reduceWith<T, Op, false>(op, pre, post, received[j], local);
      if (stepWritesOutput(s.kind)) dst[first + j] = value[j];
    }
    if (out) {
      uint64_t payload = 0;
      memcpy(&payload, value, valid * sizeof(T));
      ctx.llStore(outUnits + u * kLLUnitBytes, payload, outFlag);
    }
  }
  if (ok && out && ctx.leader()) {
    const SlotMeta m = slotMetaOf(call, bytes);
    uint64_t words[kLLMetaUnits];
    memcpy(words, &m, sizeof(m));
    for (size_t k = 0; k < kLLMetaUnits; ++k) ctx.llStore(out->llSlot(outAt) + k * kLLUnitBytes, words[k], outFlag);
  }
  if (!ctx.allAgree(ok)) return false;
  if (ctx.leader()) {
    if (out) ctx.publish(out->tail, outAt + 1);
    if (in) ctx.publish(in->head, inAt + 1);
  }
  return true;
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
    if (call.ll && (in || out)) {
      if (!runLLStep<T, Op>(ctx, call, lane, op, s, i, in, inAt, out, outAt, buffers[s.srcBuffer] + s.srcOffset,
                            buffers[s.dstBuffer] + s.dstOffset))
        return false;
      if (in) ++inStep[s.recvConn];
      if (out) ++outStep[s.sendConn];
      continue;
    }
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
        ctx.storeMeta(&out->metaOf(outAt), slotMetaOf(call, bytes));
        ctx.publish(out->tail, outAt + 1);
      }
      if (in) ctx.publish(in->head, inAt + 1);
    }
    if (in) ++inStep[s.recvConn];
    if (out) ++outStep[s.sendConn];
  }
  return true;
}

// Runs block `block` of a launch: its lanes one after the other, in call
// order, stopping at the first that fails (the status block says why; the
// other blocks see it at their next wait). `op` is the launch's operator;
// a call whose PreMulSum scalar lives in device memory reads its own.
template <typename T, typename Op, typename Ctx>
GYRE_HOST_DEVICE void runBlock(Ctx& ctx, const DeviceLaunch& launch, int block, const Op& op) {
  // A launch of one call has no work lists: block b runs its lane b.
  const uint32_t first = launch.items ? launch.blockFirst[block] : 0;
  const uint32_t last = launch.items ? launch.blockFirst[block + 1] : 1;
  for (uint32_t k = first; k < last; ++k) {
    // Every thread reads the lane's step counters when it starts, and the
    // leader published the previous lane's last step just before it got
    // here: a thread that read them first would use the wrong slots.
    if (k != first) ctx.sync();
    const LaneRef item = launch.items ? launch.items[k] : LaneRef{0, static_cast<uint16_t>(block)};
    const DeviceCall& call = launch.calls[item.call];
    Op callOp = op;
    loadScalar(callOp, call.scalarPtr);
    if (!runLane<T, Op>(ctx, call, call.lanes[item.lane], callOp)) return;
  }
}

}  // namespace gyre
