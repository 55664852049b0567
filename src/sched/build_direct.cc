#include "src/sched/build_direct.h"

#include "src/sched/step_builder.h"

namespace gyre {

void buildDirectBroadcast(const DirectShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  forEachPiece(sh.count, sh.chunkElems, [&](size_t off, size_t c) {
    if (r != sh.root) {
      out->steps.push_back(onConns(step(StepKind::Recv, 0, 0, kOutputBuffer, off, c, 0), 0, meshIndex(r, sh.root)));
      return;
    }
    // Chunk-major, so every rank gets chunk k before any gets k+1 and the
    // receivers work while the root posts the rest.
    for (int k = 1; k < n; ++k) {
      int peer = (r + k) % n;
      // Out of place, the first send also fills the root's output.
      StepKind kind = k == 1 && !sh.inPlace ? StepKind::CopySend : StepKind::Send;
      out->steps.push_back(onConns(step(kind, kInputBuffer, off, kOutputBuffer, off, c, 0), meshIndex(r, peer), 0));
    }
    if (n == 1 && !sh.inPlace) out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c, 0));
  });
}

void buildDirectAllGather(const DirectShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  const size_t own = static_cast<size_t>(r) * sh.count;
  forEachPiece(sh.count, sh.chunkElems, [&](size_t off, size_t c) {
    for (int k = 1; k < n; ++k) {
      int peer = (r + k) % n;
      Step s = sh.inPlace      ? step(StepKind::Send, kOutputBuffer, own + off, 0, 0, c, 0)
               : k == 1        ? step(StepKind::CopySend, kInputBuffer, off, kOutputBuffer, own + off, c, 0)
                               : step(StepKind::Send, kInputBuffer, off, 0, 0, c, 0);
      out->steps.push_back(onConns(s, meshIndex(r, peer), 0));
    }
    if (n == 1 && !sh.inPlace) out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, own + off, c, 0));
    // Receive in the order the peers send to this rank: rank r-1 sends here
    // first (k = 1 for it), so take it first.
    for (int k = 1; k < n; ++k) {
      int peer = (r - k + n) % n;
      size_t block = static_cast<size_t>(peer) * sh.count;
      out->steps.push_back(
          onConns(step(StepKind::Recv, 0, 0, kOutputBuffer, block + off, c, 0), 0, meshIndex(r, peer)));
    }
  });
}

void buildDirectAllReduce(const DirectShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  forEachPiece(sh.count, sh.chunkElems, [&](size_t off, size_t c) {
    for (int k = 1; k < n; ++k)
      out->steps.push_back(
          onConns(step(StepKind::Send, kInputBuffer, off, 0, 0, c, kStepPreOp), meshIndex(r, (r + k) % n), 0));
    out->steps.push_back(step(StepKind::RecvReduceCopy, kInputBuffer, off, kOutputBuffer, off, c,
                              kStepPreOp | kStepPostOp | kStepAllPeers));
  });
}

void buildDirectReduceScatter(const DirectShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  forEachPiece(sh.count, sh.chunkElems, [&](size_t off, size_t c) {
    for (int k = 1; k < n; ++k) {
      int peer = (r + k) % n;
      out->steps.push_back(onConns(
          step(StepKind::Send, kInputBuffer, static_cast<size_t>(peer) * sh.count + off, 0, 0, c, kStepPreOp),
          meshIndex(r, peer), 0));
    }
    out->steps.push_back(step(StepKind::RecvReduceCopy, kInputBuffer, static_cast<size_t>(r) * sh.count + off,
                              kOutputBuffer, off, c, kStepPreOp | kStepPostOp | kStepAllPeers));
  });
}

}  // namespace gyre
