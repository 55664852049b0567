#include "src/sched/build_single_copy.h"

#include <algorithm>

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
size_t ownerShare(const DirectShape& sh, size_t c) { return sh.nranks == 2 ? c / 3 : 0; }

Step writeTo(size_t srcOff, size_t c, int conn) {
  return onConns(step(StepKind::Recv, kInputBuffer, srcOff, 0, 0, c, kStepPeerWrite), 0, conn);
}
Step ack(int conn) { return onConns(step(StepKind::Send, kInputBuffer, 0, 0, 0, 0, 0), conn, 0); }
Step awaitAck(int conn) { return onConns(step(StepKind::Recv, 0, 0, kOutputBuffer, 0, 0, 0), 0, conn); }

}  // namespace

void buildSingleCopyBroadcast(const DirectShape& sh, ChannelSchedule* out) {
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

void buildSingleCopyAllGather(const DirectShape& sh, ChannelSchedule* out) {
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

}  // namespace gyre
