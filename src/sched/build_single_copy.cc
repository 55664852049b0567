#include "src/sched/build_single_copy.h"

#include <algorithm>

#include "src/sched/chunking.h"
#include "src/sched/step_builder.h"

namespace gyre {
namespace {

Step announce(uint8_t buf, size_t off, size_t c, int conn) {
  return onConns(step(StepKind::Send, buf, off, 0, 0, c, kStepPeerAddr), conn, 0);
}
Step readFrom(size_t dstOff, size_t c, int conn) {
  return onConns(step(StepKind::Recv, 0, 0, kOutputBuffer, dstOff, c, kStepPeerRead), 0, conn);
}
// The root writes this many of a piece's c elements into the reader's
// output itself (kStepPeerWrite) while the reader reads the rest, so both
// cores copy. A third, not half: out of place the root also copies its own
// output. Only from values every rank shares (not its own placement), so
// the root and the reader cut each piece alike.
size_t ownerShare(const DirectShape& sh, size_t c) { return sh.nranks == 2 && !sh.byValueIfPrivate ? c / 3 : 0; }

Step writeTo(size_t srcOff, size_t c, int conn) {
  return onConns(step(StepKind::Recv, kInputBuffer, srcOff, 0, 0, c, kStepPeerWrite), 0, conn);
}
// One piece of this rank's block, reduced from every rank's input in rank
// order, the peers' read where they are (their announcements, by reference).
Step reduceByReference(size_t srcOff, size_t dstOff, size_t c) {
  return step(StepKind::RecvReduceCopy, kInputBuffer, srcOff, kOutputBuffer, dstOff, c,
              kStepPreOp | kStepPostOp | kStepAllPeers | kStepPeerRead | kStepByValueIfPrivate);
}
// The reductions' announcements and reads: an owner whose buffer peers
// cannot map sends the elements in the slot (kStepByValueIfPrivate), where
// process_vm_readv would be slower than the FIFO.
Step offer(uint8_t buf, size_t off, size_t c, int conn) {
  Step s = announce(buf, off, c, conn);
  s.flags |= kStepByValueIfPrivate;
  return s;
}
Step fetch(size_t dstOff, size_t c, int conn) {
  Step s = readFrom(dstOff, c, conn);
  s.flags |= kStepByValueIfPrivate;
  return s;
}
// With shape.byValueIfPrivate, every announcement and read from `first` on.
void markByValue(const DirectShape& sh, size_t first, ChannelSchedule* out) {
  if (!sh.byValueIfPrivate) return;
  for (size_t i = first; i < out->steps.size(); ++i)
    if ((out->steps[i].flags & (kStepPeerAddr | kStepPeerRead)) || out->steps[i].count == 0)
      out->steps[i].flags |= kStepByValueIfPrivate;
}
Step ack(int conn) { return onConns(step(StepKind::Send, kInputBuffer, 0, 0, 0, 0, 0), conn, 0); }
Step awaitAck(int conn) { return onConns(step(StepKind::Recv, 0, 0, kOutputBuffer, 0, 0, 0), 0, conn); }
// Acknowledgements both sides skip where nothing went by reference.
Step ackIfReferenced(int conn) {
  Step s = ack(conn);
  s.flags |= kStepByValueIfPrivate;
  return s;
}
Step awaitAckIfReferenced(int conn) {
  Step s = awaitAck(conn);
  s.flags |= kStepByValueIfPrivate;
  return s;
}

void buildSingleCopyBroadcastSteps(const DirectShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  bool split = false;
  if (r != sh.root) {
    const int root = meshIndex(r, sh.root);
    forEachPiece(sh.count, sh.chunkElems, [&](size_t off, size_t c) {
      size_t w = ownerShare(sh, c);
      if (w) out->steps.push_back(announce(kOutputBuffer, off + c - w, w, root));
      split |= w != 0;
      out->steps.push_back(readFrom(off, c - w, root));
    });
    out->steps.push_back(ack(root));
    if (split) out->steps.push_back(awaitAck(root));  // the root's writes are done
    return;
  }
  forEachPiece(sh.count, sh.chunkElems, [&](size_t off, size_t c) {
    size_t w = ownerShare(sh, c);
    split |= w != 0;
    for (int k = 1; k < n; ++k) {
      int conn = meshIndex(r, (r + k) % n);
      out->steps.push_back(announce(kInputBuffer, off, c - w, conn));
      if (w) out->steps.push_back(writeTo(off + c - w, w, conn));
    }
    if (!sh.inPlace) out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c, 0));
  });
  if (split)
    for (int k = 1; k < n; ++k) out->steps.push_back(ack(meshIndex(r, (r + k) % n)));
  for (int k = 1; k < n; ++k) out->steps.push_back(awaitAck(meshIndex(r, (r + k) % n)));
}

void buildSingleCopyAllGatherSteps(const DirectShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  const size_t own = static_cast<size_t>(r) * sh.count;
  // Per piece: announce to all, then read from all. Announcing every piece
  // first could fill a FIFO (8 slots) while its reader is still announcing.
  forEachPiece(sh.count, sh.chunkElems, [&](size_t off, size_t c) {
    for (int k = 1; k < n; ++k) {
      int conn = meshIndex(r, (r + k) % n);
      out->steps.push_back(sh.inPlace ? announce(kOutputBuffer, own + off, c, conn) : announce(kInputBuffer, off, c, conn));
    }
    if (!sh.inPlace) out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, own + off, c, 0));
    for (int k = 1; k < n; ++k) {
      int peer = (r - k + n) % n;
      out->steps.push_back(readFrom(static_cast<size_t>(peer) * sh.count + off, c, meshIndex(r, peer)));
    }
  });
  for (int k = 1; k < n; ++k) out->steps.push_back(ack(meshIndex(r, (r + k) % n)));
  for (int k = 1; k < n; ++k) out->steps.push_back(awaitAck(meshIndex(r, (r - k + n) % n)));
}

}  // namespace

void buildSingleCopyBroadcast(const DirectShape& sh, ChannelSchedule* out) {
  const size_t first = out->steps.size();
  buildSingleCopyBroadcastSteps(sh, out);
  markByValue(sh, first, out);
}

void buildSingleCopyAllGather(const DirectShape& sh, ChannelSchedule* out) {
  const size_t first = out->steps.size();
  buildSingleCopyAllGatherSteps(sh, out);
  markByValue(sh, first, out);
}

void buildSingleCopyReduceScatter(const DirectShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  const size_t own = static_cast<size_t>(r) * sh.count;
  forEachPiece(sh.count, sh.chunkElems, [&](size_t off, size_t c) {
    for (int k = 1; k < n; ++k) {
      int peer = (r + k) % n;
      out->steps.push_back(offer(kInputBuffer, static_cast<size_t>(peer) * sh.count + off, c, meshIndex(r, peer)));
    }
    out->steps.push_back(reduceByReference(own + off, off, c));
  });
  for (int k = 1; k < n; ++k) out->steps.push_back(ackIfReferenced(meshIndex(r, (r + k) % n)));
  for (int k = 1; k < n; ++k) out->steps.push_back(awaitAckIfReferenced(meshIndex(r, (r - k + n) % n)));
}

void buildSingleCopyAllReduce(const DirectShape& sh, size_t alignElems, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  auto block = [&](int p) { return splitSegment(0, sh.count, static_cast<size_t>(n), static_cast<size_t>(p), alignElems); };
  auto pieces = [&](int p) { return divUp(block(p).count, sh.chunkElems); };
  size_t rounds = 0;
  for (int p = 0; p < n; ++p) rounds = std::max(rounds, pieces(p));
  // Piece k of block p: its offset and length.
  auto piece = [&](int p, size_t k, size_t* off, size_t* c) {
    Segment b = block(p);
    *off = b.offset + k * sh.chunkElems;
    *c = std::min(sh.chunkElems, b.count - k * sh.chunkElems);
  };
  for (size_t k = 0; k < rounds; ++k) {
    size_t off, c;
    // Each peer reduces its block: tell it where this rank's input for it is.
    for (int j = 1; j < n; ++j) {
      int peer = (r + j) % n;
      if (k >= pieces(peer)) continue;
      piece(peer, k, &off, &c);
      out->steps.push_back(offer(kInputBuffer, off, c, meshIndex(r, peer)));
    }
    if (k < pieces(r)) {
      piece(r, k, &off, &c);
      out->steps.push_back(reduceByReference(off, off, c));
      for (int j = 1; j < n; ++j) out->steps.push_back(offer(kOutputBuffer, off, c, meshIndex(r, (r + j) % n)));
    }
    // The peers' results for this round. In place, this overwrites input
    // the peer read: it announced its result only after reducing it.
    for (int j = 1; j < n; ++j) {
      int peer = (r - j + n) % n;
      if (k >= pieces(peer)) continue;
      piece(peer, k, &off, &c);
      out->steps.push_back(fetch(off, c, meshIndex(r, peer)));
    }
  }
  for (int k = 1; k < n; ++k) out->steps.push_back(ackIfReferenced(meshIndex(r, (r + k) % n)));
  for (int k = 1; k < n; ++k) out->steps.push_back(awaitAckIfReferenced(meshIndex(r, (r - k + n) % n)));
}

}  // namespace gyre
