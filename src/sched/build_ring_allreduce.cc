#include "src/sched/build_ring_allreduce.h"

#include "src/sched/chunking.h"
#include "src/sched/step_builder.h"

namespace gyre {

void buildRingAllReduce(const RingAllReduceShape& sh, ChannelSchedule* out) {
  const int n = sh.nranks;
  if (sh.count == 0) return;
  if (n == 1) {
    // Still a reduction of one value: pre and post apply (an average over one
    // rank of integers divides by 1, a PreMulSum scales).
    for (size_t done = 0; done < sh.count; done += sh.chunkElems) {
      size_t c = std::min(sh.chunkElems, sh.count - done), off = sh.offset + done;
      out->steps.push_back(step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c,
                                    kStepPreOp | kStepPostOp));
    }
    return;
  }
  const size_t loop = static_cast<size_t>(n) * sh.chunkElems;
  // Segment indices are taken mod n. In the reduce-scatter, rank r handles
  // segment r-k at step k, so after n-1 steps it holds the full reduction of
  // segment r+1; in the all-gather it receives the finished segment r-m+1 at
  // step m, ending with segment r+2.
  auto mod = [n](int i) { return static_cast<size_t>((i % n + n) % n); };
  for (size_t done = 0; done < sh.count; done += loop) {
    size_t span = std::min(loop, sh.count - done), base = sh.offset + done;
    auto seg = [&](int index) { return splitSegment(base, span, n, mod(index), sh.alignElems); };
    auto emit = [&](StepKind kind, Segment s, uint8_t srcBuf, uint8_t dstBuf, uint8_t flags) {
      if (s.count) out->steps.push_back(step(kind, srcBuf, s.offset, dstBuf, s.offset, s.count, flags));
    };
    emit(StepKind::Send, seg(sh.rank), kInputBuffer, 0, kStepPreOp);
    for (int k = 1; k < n - 1; ++k)
      emit(StepKind::RecvReduceSend, seg(sh.rank - k), kInputBuffer, 0, kStepPreOp);
    emit(StepKind::RecvReduceCopySend, seg(sh.rank + 1), kInputBuffer, kOutputBuffer, kStepPreOp | kStepPostOp);
    for (int m = 1; m < n - 1; ++m) emit(StepKind::RecvCopySend, seg(sh.rank - m + 1), 0, kOutputBuffer, 0);
    emit(StepKind::Recv, seg(sh.rank + 2), 0, kOutputBuffer, 0);
  }
}

void buildDoublingAllReduce(const RingAllReduceShape& sh, ChannelSchedule* out) {
  int rounds = 0;
  while ((1 << rounds) < sh.nranks) ++rounds;
  for (size_t done = 0; done < sh.count; done += sh.chunkElems) {
    size_t c = std::min(sh.chunkElems, sh.count - done), off = sh.offset + done;
    for (int j = 0; j < rounds; ++j) {
      const bool first = j == 0, last = j == rounds - 1;
      // Round 0 starts from the input (pre-op'd); later rounds from the partial result.
      const uint8_t src = first ? kInputBuffer : kOutputBuffer;
      const uint8_t pre = first ? kStepPreOp : 0;
      const uint8_t order = (sh.rank & (1 << j)) == 0 ? kStepLocalFirst : 0;  // the lower rank's operand first
      Step send = step(StepKind::Send, src, off, 0, 0, c, pre);
      Step reduce = step(StepKind::RecvReduceCopy, src, off, kOutputBuffer, off, c,
                         pre | (last ? kStepPostOp : 0) | order);
      send.sendConn = reduce.recvConn = static_cast<uint8_t>(j);
      out->steps.push_back(send);
      out->steps.push_back(reduce);
    }
  }
}

}  // namespace gyre
