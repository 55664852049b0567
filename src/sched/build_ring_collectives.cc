#include "src/sched/build_ring_collectives.h"

#include <algorithm>

#include "src/sched/step_builder.h"

namespace gyre {
namespace {

int mod(int i, int n) { return ((i % n) + n) % n; }

// Calls fn(offset, count) for each chunk of the channel's range.
template <typename Fn>
void forEachChunk(const RingShape& sh, Fn fn) {
  size_t end = sh.rangeBegin + sh.rangeCount;
  for (size_t off = sh.rangeBegin; off < end; off += sh.chunkElems) fn(off, std::min(sh.chunkElems, end - off));
}

}  // namespace

void buildRingBroadcast(const RingShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks;
  const int pos = mod(sh.rank - sh.root, n);  // distance from the root along the chain
  forEachChunk(sh, [&](size_t off, size_t c) {
    if (n == 1) {
      if (!sh.inPlace) out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c, 0));
    } else if (pos == 0) {
      // Out of place, the chunk goes to the slot before the root's own copy
      // (not CopySend, which copies first): the next rank starts a copy
      // sooner, and a message of one chunk takes two copy times, not three.
      out->steps.push_back(step(StepKind::Send, kInputBuffer, off, 0, 0, c, 0));
      if (!sh.inPlace) out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c, 0));
    } else if (pos < n - 1) {
      out->steps.push_back(step(StepKind::RecvCopySend, 0, 0, kOutputBuffer, off, c, 0));
    } else {
      out->steps.push_back(step(StepKind::Recv, 0, 0, kOutputBuffer, off, c, 0));
    }
  });
}

void buildRingReduce(const RingShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks;
  const int pos = mod(sh.rank - sh.root - 1, n);  // 0 starts the chain, n-1 is the root
  forEachChunk(sh, [&](size_t off, size_t c) {
    if (n == 1)
      out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c, kStepPreOp | kStepPostOp));
    else if (pos == 0)
      out->steps.push_back(step(StepKind::Send, kInputBuffer, off, 0, 0, c, kStepPreOp));
    else if (pos < n - 1)
      out->steps.push_back(step(StepKind::RecvReduceSend, kInputBuffer, off, 0, 0, c, kStepPreOp));
    else
      out->steps.push_back(
          step(StepKind::RecvReduceCopy, kInputBuffer, off, kOutputBuffer, off, c, kStepPreOp | kStepPostOp));
  });
}

void buildRingAllGather(const RingShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  const size_t count = sh.count;
  auto block = [&](int ownerPos) {
    int p = mod(ownerPos, n);
    return static_cast<size_t>(sh.ringRanks ? sh.ringRanks[p] : p) * count;
  };
  forEachChunk(sh, [&](size_t off, size_t c) {
    if (n == 1) {
      if (!sh.inPlace) out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c, 0));
      return;
    }
    // Step k forwards the block that started at rank r-k.
    if (sh.inPlace)
      out->steps.push_back(step(StepKind::Send, kOutputBuffer, block(r) + off, 0, 0, c, 0));
    else
      out->steps.push_back(step(StepKind::CopySend, kInputBuffer, off, kOutputBuffer, block(r) + off, c, 0));
    for (int k = 1; k < n - 1; ++k)
      out->steps.push_back(step(StepKind::RecvCopySend, 0, 0, kOutputBuffer, block(r - k) + off, c, 0));
    out->steps.push_back(step(StepKind::Recv, 0, 0, kOutputBuffer, block(r - (n - 1)) + off, c, 0));
  });
}

void buildRingReduceScatter(const RingShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks, r = sh.rank;
  const size_t count = sh.count;
  auto block = [&](int ownerPos) {
    int p = mod(ownerPos, n);
    return static_cast<size_t>(sh.ringRanks ? sh.ringRanks[p] : p) * count;
  };
  forEachChunk(sh, [&](size_t off, size_t c) {
    if (n == 1) {
      out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c, kStepPreOp | kStepPostOp));
      return;
    }
    // Block b's chain starts at rank b+1 and ends, fully reduced, at rank b.
    out->steps.push_back(step(StepKind::Send, kInputBuffer, block(r - 1) + off, 0, 0, c, kStepPreOp));
    for (int k = 1; k < n - 1; ++k)
      out->steps.push_back(step(StepKind::RecvReduceSend, kInputBuffer, block(r - 1 - k) + off, 0, 0, c, kStepPreOp));
    out->steps.push_back(
        step(StepKind::RecvReduceCopy, kInputBuffer, block(r) + off, kOutputBuffer, off, c, kStepPreOp | kStepPostOp));
  });
}

}  // namespace gyre
