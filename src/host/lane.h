// A lane (src/sched/lane_spec.h) on the host. The host executor interleaves
// many lanes in one thread, running each lane's next steps whenever they are
// ready and never blocking inside a lane, so channels overlap and a group of
// sends and receives cannot deadlock on ordering.
//
// TypedLane<T, Op> is the step loop for one element type and operator; the
// only virtual call is advance(), once per lane per pass, not per step or element.
#pragma once

#include <cstring>
#include <type_traits>
#include <vector>

#include "src/kernels/primitives/reduce_copy.h"
#include "src/kernels/primitives/reduce_op.h"
#include "src/call/coll_kind.h"
#include "src/debug/error.h"
#include "src/host/element_loops.h"
#include "src/host/host_comm.h"
#include "src/host/lane_trace.h"
#include "src/host/outbox.h"
#include "src/host/peer_read.h"
#include "src/host/shareable_memory.h"
#include "src/host/streaming_copy.h"
#include "src/host/user_payloads.h"
#include "src/host/wait.h"
#include "src/sched/lane_spec.h"
#include "src/sched/slot_meta.h"

namespace gyre {

class Lane {
 public:
  Lane(const LaneSpec& spec, HostComm* comm) { bind(spec, comm); }
  virtual ~Lane() = default;

  // Whether rebind(spec) may reuse this lane: the element type and operator
  // (baked into the typed loop) are the same. PreMulSum scalars are not compared, so
  // lanes with one are never reused.
  bool reusableFor(const LaneSpec& spec) const {
    return !spec.hasScalar && !spec_.hasScalar && spec.datatype == spec_.datatype && spec.op == spec_.op &&
           spec.nranks == spec_.nranks;  // ncclAvg scales by 1/nranks
  }
  // Starts the lane over on a new call, keeping its allocations.
  void rebind(const LaneSpec& spec, HostComm* comm) {
    bind(spec, comm);
    rewind();
  }

  // Starts the lane over on the same call shape with new buffers and sequence
  // number (a repeated call, src/host/repeat_call.h): only what differs
  // is written, not the whole spec.
  void restart(const void* input, void* output, uint64_t opCount) {
    spec_.buffers[kInputBuffer] = const_cast<void*>(input);
    spec_.buffers[kOutputBuffer] = output;
    spec_.opCount = opCount;
    rewind();
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
  HostComm* comm() const { return comm_; }
  size_t nextStep() const { return next_; }
  // The connection the next step waits on (for timeout messages), or null.
  Connection* blockingConnection() const;
  // Profiler events of this lane's steps, while a plugin asks for them.
  LaneTrace* trace() const { return trace_; }
  void setTrace(LaneTrace* t) { trace_ = t; }

 protected:
  LaneSpec spec_;
  HostComm* comm_ = nullptr;
  size_t next_ = 0;
  std::vector<const Lane*> before_;
  LaneTrace* trace_ = nullptr;
  // Single copy: the connections (by index, as in Step::sendConn/recvConn:
  // the peer's mesh index) on which this call announced, or was announced,
  // elements by reference. An acknowledgement flagged
  // kStepByValueIfPrivate is skipped on both sides where nothing went by
  // reference: no buffer was read in place, so there is nothing to wait for.
  uint64_t sentByReference_ = 0;
  uint64_t receivedByReference_ = 0;
  // Some send connection takes payloads by pointer (user_payloads.h), so a
  // step that writes its dst first checks that no send still reads there.
  bool checkSendsFromUser_ = false;
  // The send connection whose payload, still read from user memory, holds
  // up the next step (it would overwrite it), or null.
  Connection* heldBySend_ = nullptr;
  // The piece this call last staged in its channel's outbox (outbox.h) and
  // the slot holding it, so announcing it to the next peer copies nothing.
  const void* stagedSrc_ = nullptr;
  uint32_t stagedBytes_ = 0;
  int stagedSlot_ = -1;

 private:
  void bind(const LaneSpec& spec, HostComm* comm) {
    spec_ = spec;
    comm_ = comm;
    if (spec_.single) {
      (spec_.single->isSend ? spec_.send : spec_.recv) = &spec_.single;
      (spec_.single->isSend ? spec_.nsend : spec_.nrecv) = 1;
    }
    checkSendsFromUser_ = false;
    for (size_t i = 0; i < spec_.nsend; ++i) checkSendsFromUser_ |= spec_.send[i]->pointers != nullptr;
  }
  // Back to the first step, with no lane to wait for.
  void rewind() {
    next_ = 0;
    before_.clear();
    sentByReference_ = receivedByReference_ = 0;
    heldBySend_ = nullptr;
    stagedSrc_ = nullptr;
  }
};


// Both ranks must run the same call with the same arguments; otherwise the
// bytes would be silently misinterpreted. A mismatch fails the communicator.
ncclResult_t checkSlotMeta(const LaneSpec& spec, HostComm* comm, const Connection& in, uint32_t expectedBytes);

template <typename T, typename Op>
class TypedLane final : public Lane {
 public:
  TypedLane(const LaneSpec& spec, HostComm* comm, Op op) : Lane(spec, comm), loops_{op} {}

  ncclResult_t advance(bool* progressed) override {
    if (waiting()) return ncclSuccess;
    while (next_ < spec_.nsteps) {
      const Step& s = spec_.steps[next_];
      if (unneededAcknowledgement(s)) {
        ++next_;
        continue;
      }
      if (trace_) trace_->reached(next_);
      Connection* in = stepReceives(s.kind) ? spec_.recv[s.recvConn] : nullptr;
      Connection* out = stepSends(s.kind) ? spec_.send[s.sendConn] : nullptr;
      const uint32_t bytes = static_cast<uint32_t>(s.count * sizeof(T));
      char* dst = reinterpret_cast<char*>(spec_.buffers[s.dstBuffer]) + s.dstOffset * sizeof(T);
      heldBySend_ = checkSendsFromUser_ && stepWritesDst(s.kind)
                        ? pendingSendOverlapping(spec_.send, spec_.nsend, dst, dst + bytes)
                        : nullptr;
      if (heldBySend_) return ncclSuccess;
      if (in && !recvDataReady(*in)) {
        offerDestination(*in, s.kind, dst, bytes);
        return ncclSuccess;
      }
      if (out && !sendSlotFree(*out, bytes)) return ncclSuccess;
      if ((s.flags & kStepAllPeers) && !allPeersReady()) return ncclSuccess;
      GYRE_CHECK(runStep(s, in, out));
      ++next_;
      *progressed = true;
    }
    if (trace_) trace_->reached(next_);  // the last step's events end
    return ncclSuccess;
  }

 private:
  bool unneededAcknowledgement(const Step& s) const {
    if (!(s.flags & kStepByValueIfPrivate) || s.count != 0) return false;
    if (s.kind == StepKind::Send) return !(receivedByReference_ >> s.sendConn & 1);
    return !(sentByReference_ >> s.recvConn & 1);
  }

  ncclResult_t runStep(const Step& s, Connection* in, Connection* out) {
    T* const* buffers = reinterpret_cast<T* const*>(spec_.buffers);
    const T* src = buffers[s.srcBuffer] + s.srcOffset;
    T* dst = buffers[s.dstBuffer] + s.dstOffset;
    const bool pre = Op::kHasPre && (s.flags & kStepPreOp);
    const bool post = Op::kHasPost && (s.flags & kStepPostOp);
    const uint32_t bytes = static_cast<uint32_t>(s.count * sizeof(T));
    const T* received = nullptr;
    T* outgoing = nullptr;
    if ((s.flags & kStepAllPeers) && (s.flags & kStepPeerRead))
      return reduceAllPeersByReference(pre, post, s.flags & kStepByValueIfPrivate, src, dst, s.count, bytes);
    if (s.flags & (kStepPeerAddr | kStepPeerRead | kStepPeerWrite))
      return runSingleCopyStep(s, src, dst, in, out, bytes);
    if (s.flags & kStepAllPeers) return reduceAllPeers(pre, post, src, dst, s.count, bytes);
    if (in) {
      GYRE_CHECK(checkSlotMeta(spec_, comm_, *in, bytes));
      received = static_cast<const T*>(receivedPayload(*in, bytes));
    }
    if (out && out->pointers) {
      const T* fromUser = bytes < kByPointerMinBytes ? nullptr : sentElementsInUserMemory(s.kind, pre, post, src, dst);
      out->pointers->sendFrom[out->step % kFifoSlots] = reinterpret_cast<const char*>(fromUser);
      if (fromUser) {
        runStepSendingFromUser(s, pre, post, received, src, dst);
        return publishStep(bytes, in, out);
      }
    }
    if (received == dst && (s.kind == StepKind::Recv || s.kind == StepKind::RecvCopySend)) {
      // The transport read the payload into dst (offerDestination).
      if (out) loops_.copyToSlot(false, false, dst, outgoingSlot(out, bytes), s.count);
      return publishStep(bytes, in, out);
    }
    if (out) outgoing = outgoingSlot(out, bytes);
    switch (s.kind) {
      case StepKind::Copy: copyToOutput(pre, post, src, dst, s.count); break;
      case StepKind::Send: loops_.copyToSlot(pre, post, src, outgoing, s.count); break;
      case StepKind::CopySend: copyToOutputAndSlot(pre, post, src, dst, outgoing, s.count); break;
      case StepKind::Recv: copyToOutput(false, false, received, dst, s.count); break;
      case StepKind::RecvCopySend: copyToOutputAndSlot(false, false, received, dst, outgoing, s.count); break;
      case StepKind::RecvReduceSend: loops_.reduceToSlot(pre, post, received, src, outgoing, s.count); break;
      case StepKind::RecvReduceCopySend: loops_.reduce(pre, post, received, src, dst, outgoing, s.count); break;
      case StepKind::RecvReduceCopy:
        if (s.flags & kStepLocalFirst) loops_.template reduce<true>(pre, post, received, src, dst, nullptr, s.count);
        else loops_.reduce(pre, post, received, src, dst, nullptr, s.count);
        break;
    }
    return publishStep(bytes, in, out);
  }

  // Whether copying n elements from src into dst takes streaming stores:
  // the lane's call is large (its output would not stay in the caches) and
  // the two do not overlap (an in-place step moves elements within dst).
  bool streams(const T* src, const T* dst, size_t n) const {
    return spec_.streamingStores && n && (dst + n <= src || src + n <= dst);
  }

  // n elements into the output; plain ones (no pre- or post-op) of a large
  // call with streaming stores.
  void copyToOutput(bool pre, bool post, const T* src, T* dst, size_t n) const {
    if (!pre && !post && streams(src, dst, n)) copyStreaming(dst, src, n * sizeof(T));
    else loops_.copyInto(pre, post, src, dst, n);
  }

  // n elements into the output and into the slot a peer reads next. The
  // slot never gets streaming stores (they would send it to memory), so a
  // streamed copy fills it from src instead of from dst.
  void copyToOutputAndSlot(bool pre, bool post, const T* src, T* dst, T* slot, size_t n) const {
    if (pre || post || !streams(src, dst, n)) {
      loops_.copyAndSend(pre, post, src, dst, slot, n);
      return;
    }
    loops_.copyToSlot(false, false, src, slot, n);
    copyStreaming(dst, src, n * sizeof(T));
  }

  ncclResult_t publishStep(uint32_t bytes, Connection* in, Connection* out) {
    if (out) {
      out->fifo.metaOf(out->step) = makeSlotMeta(spec_, bytes);
      publishSent(*out);
    }
    if (in) publishConsumed(*in);
    return ncclSuccess;
  }

  static T* outgoingSlot(Connection* out, uint32_t bytes) { return reinterpret_cast<T*>(out->fifo.payload(out->step, bytes)); }

  // A sending step whose sent elements the transport takes from user memory
  // (sentElementsInUserMemory): only what lands in dst is written here.
  void runStepSendingFromUser(const Step& s, bool pre, bool post, const T* received, const T* src, T* dst) {
    switch (s.kind) {
      case StepKind::CopySend:
        if (dst != src) copyToOutput(false, false, src, dst, s.count);
        break;
      case StepKind::RecvCopySend:
        if (dst != received) copyToOutput(false, false, received, dst, s.count);
        break;
      case StepKind::RecvReduceCopySend: loops_.reduce(pre, post, received, src, dst, nullptr, s.count); break;
      default: break;  // Send: nothing to copy at all
    }
  }

  bool allPeersReady() const {
    for (size_t i = 0; i < spec_.nrecv; ++i)
      if (!recvDataReady(*spec_.recv[i])) return false;
    return true;
  }

  // One-shot AllReduce: dst = x0 op x1 op ... op x(n-1), left to right in
  // rank order on every rank (so all agree bitwise), where x(rank) is the
  // local src and the others sit in the mesh's slots (receive connection i
  // is rank i, or i+1 from this rank on). Each 16 KiB block goes through a
  // stack buffer and reaches dst by memcpy only after all n inputs were
  // read, so dst may be the local src (in place). Received inputs arrive
  // pre-op'd by their senders; `pre` applies to the local one only.
  static constexpr int kMaxInputs = 64;

  ncclResult_t checkMeshWidth() const {
    if (spec_.nranks > kMaxInputs || spec_.nrecv != static_cast<size_t>(spec_.nranks - 1))
      return fail(ncclInternalError, "one-shot %s over %zu connections for %d ranks", collName(spec_.coll),
                  spec_.nrecv, spec_.nranks);
    return ncclSuccess;
  }
  // inputs[p] for every rank p in order: `local` for this rank, for a peer
  // whatever peerInput(index of its connection, connection, &inputs[p])
  // finds once its step's metadata checked out.
  template <typename PeerInput>
  ncclResult_t gatherInputs(const T* local, uint32_t bytes, const T** inputs, const PeerInput& peerInput) {
    GYRE_CHECK(checkMeshWidth());
    for (int p = 0; p < spec_.nranks; ++p) {
      if (p == spec_.rank) {
        inputs[p] = local;
        continue;
      }
      const int index = p < spec_.rank ? p : p - 1;
      Connection& c = *spec_.recv[index];
      GYRE_CHECK(checkSlotMeta(spec_, comm_, c, bytes));
      GYRE_CHECK(peerInput(index, c, &inputs[p]));
    }
    return ncclSuccess;
  }

  ncclResult_t reduceAllPeers(bool pre, bool post, const T* local, T* dst, size_t n, uint32_t bytes) {
    const T* inputs[kMaxInputs];
    GYRE_CHECK(gatherInputs(local, bytes, inputs, [&](int, Connection& c, const T** in) {
      *in = reinterpret_cast<const T*>(c.fifo.payload(c.step, bytes));
      return ncclSuccess;
    }));
    loops_.reduceInRankOrder(spec_.rank, spec_.nranks, inputs, pre, post, dst, n);
    for (size_t i = 0; i < spec_.nrecv; ++i) publishConsumed(*spec_.recv[i]);
    return ncclSuccess;
  }

  // Single-copy AllReduce and ReduceScatter (build_single_copy.h): each peer
  // announced where its input elements for this piece are (kStepPeerAddr),
  // and they are reduced from there: through a mapping of the peer's
  // shareable buffer in place, else copied first with process_vm_readv into
  // a staging buffer of this lane. Inputs are taken as they are, so the
  // planner keeps operators with a pre-op (PreMulSum, float average) off
  // this step: a peer's scalar is not known here.
  ncclResult_t reduceAllPeersByReference(bool pre, bool post, bool byValue, const T* local, T* dst, size_t n,
                                         uint32_t bytes) {
    if (pre) return fail(ncclInternalError, "single-copy %s with a pre-op operator", collName(spec_.coll));
    if (staging_.size() < spec_.nrecv * n) staging_.resize(spec_.nrecv * n);
    const T* inputs[kMaxInputs];
    GYRE_CHECK(gatherInputs(local, bytes, inputs, [&](int index, Connection& c, const T** in) {
      uint64_t remote = 0;
      bool byReference = false;
      *in = static_cast<const T*>(announcedElements(comm_, c, bytes, byValue, &remote, &byReference));
      if (byReference) receivedByReference_ |= uint64_t{1} << index;
      if (*in) return ncclSuccess;
      T* stage = staging_.data() + static_cast<size_t>(index) * n;
      *in = stage;
      return readPeer(spec_, comm_, c.peer, remote, stage, bytes);
    }));
    // The local input is read at step max(rank, 1), dst first written at
    // step 1: in place, ranks from 2 on would overwrite their input too soon.
    const bool aliases = dst < local + n && local < dst + n;
    ShareableRange range;
    const bool inDst = (!aliases || spec_.rank <= 1) && !findShareable(dst, bytes, &range);
    loops_.reduceInRankOrder(spec_.rank, spec_.nranks, inputs, false, post, dst, n, inDst);
    for (size_t i = 0; i < spec_.nrecv; ++i) publishConsumed(*spec_.recv[i]);
    return ncclSuccess;
  }

  // A Send posts where its elements are, not the elements; the receiver
  // reads them from this process (kStepPeerAddr / kStepPeerRead), or writes
  // its src there (kStepPeerWrite: the address is the sender's destination).
  // The address rides in the slot's inline line, so the step moves one cache
  // line; with it, where the elements lie in a shareable allocation
  // (ncclMemAlloc without a GPU), how to map it, so the copy is a memcpy
  // through the peer's mapping (peer_mappings.h) instead of process_vm_readv.
  // With kStepByValueIfPrivate (the single-copy reductions) an owner whose
  // buffer is not shareable sends the elements in the slot instead.
  ncclResult_t runSingleCopyStep(const Step& step, const T* src, T* dst, Connection* in, Connection* out, uint32_t bytes) {
    const bool byValue = step.flags & kStepByValueIfPrivate;
    if (out) {
      const void* from = byValue && stagesInOutbox(step, src, bytes) ? stageInOutbox(src, bytes, *out) : src;
      if (announceElements(*out, from, bytes, byValue)) sentByReference_ |= uint64_t{1} << step.sendConn;
      out->fifo.metaOf(out->step) = makeSlotMeta(spec_, bytes);
      publishSent(*out);
    }
    if (in) {
      GYRE_CHECK(checkSlotMeta(spec_, comm_, *in, bytes));
      uint64_t remote = 0;
      bool byReference = true;
      if (step.flags & kStepPeerWrite) {
        PeerAddress where;
        memcpy(&where, in->fifo.payload(in->step, sizeof(where)), sizeof(where));
        if (char* mapped = comm_->peerMappings.locate(in->peer, (*comm_->peers)[in->peer].pid, where, bytes))
          memcpy(mapped, src, bytes);
        else GYRE_CHECK(writePeer(spec_, comm_, in->peer, where.address, src, bytes));
      } else if (const void* there = announcedElements(comm_, *in, bytes, byValue, &remote, &byReference)) {
        copyToOutput(false, false, static_cast<const T*>(there), dst, step.count);
      } else {
        GYRE_CHECK(readPeer(spec_, comm_, in->peer, remote, dst, bytes));
      }
      if (byReference) receivedByReference_ |= uint64_t{1} << step.recvConn;
      publishConsumed(*in);
    }
    return ncclSuccess;
  }

  // A private piece that AllGather announces to every peer of 3+ ranks (by
  // value it would be copied into each peer's FIFO; outbox.h).
  bool stagesInOutbox(const Step& step, const T* src, uint32_t bytes) const {
    if (!(step.flags & kStepPeerAddr) || spec_.nranks < 3 || bytes < kOutboxMinBytes) return false;
    if (spec_.coll != CollKind::AllGather) return false;
    ShareableRange range;
    return !findShareable(src, bytes, &range);
  }

  // Where to announce a private piece from: its copy in the channel's
  // outbox, made for the first peer it goes to, or `src` itself (by value)
  // where the outbox has no free slot.
  const void* stageInOutbox(const T* src, uint32_t bytes, const Connection& out) {
    Outbox& box = comm_->outboxes.forChannel(spec_.channel);
    if (src == stagedSrc_ && bytes == stagedBytes_) return box.share(stagedSlot_, out);
    const int slot = box.stage(src, bytes, out);
    if (slot < 0) return src;
    stagedSrc_ = src;
    stagedBytes_ = bytes;
    stagedSlot_ = slot;
    return box.slotData(slot);
  }

  ElementLoops<T, Op> loops_;
  std::vector<T> staging_;  // peers' inputs read by process_vm_readv (single-copy reductions)
};

}  // namespace gyre
