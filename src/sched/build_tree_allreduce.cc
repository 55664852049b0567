#include "src/sched/build_tree_allreduce.h"

#include <algorithm>

#include "src/sched/step_builder.h"

namespace gyre {
namespace {

Step withConns(Step s, int sendConn, int recvConn) {
  s.sendConn = static_cast<uint8_t>(sendConn);
  s.recvConn = static_cast<uint8_t>(recvConn);
  return s;
}

// Reduces the children's partial sums and this rank's input for one chunk.
// The output buffer serves as the accumulator between children; the last
// child's step either sends the partial sum up or (at the root) finishes it.
void reduceUp(const TreeAllReduceShape& sh, size_t off, size_t c, ChannelSchedule* out) {
  const uint8_t finish = sh.hasParent ? 0 : kStepPostOp;
  if (sh.nchildren == 0) {
    out->steps.push_back(sh.hasParent ? step(StepKind::Send, kInputBuffer, off, 0, 0, c, kStepPreOp)
                                      : step(StepKind::Copy, kInputBuffer, off, kOutputBuffer, off, c,
                                             kStepPreOp | kStepPostOp));
    return;
  }
  for (int child = 0; child < sh.nchildren; ++child) {
    bool first = child == 0, last = child == sh.nchildren - 1;
    uint8_t src = first ? kInputBuffer : kOutputBuffer;
    uint8_t pre = first ? kStepPreOp : 0;
    Step s = last && sh.hasParent ? step(StepKind::RecvReduceSend, src, off, 0, 0, c, pre)
                                  : step(StepKind::RecvReduceCopy, src, off, kOutputBuffer, off, c,
                                         static_cast<uint8_t>(pre | (last ? finish : 0)));
    out->steps.push_back(withConns(s, 0, child));
  }
}

// Passes one finished chunk to the children; `received` says whether it
// arrives from the parent (else it is already in the output, at the root).
void sendDown(const TreeAllReduceShape& sh, size_t off, size_t c, bool received, ChannelSchedule* out) {
  for (int child = 0; child < sh.nchildren; ++child) {
    if (received && child == 0)
      out->steps.push_back(withConns(step(StepKind::RecvCopySend, 0, 0, kOutputBuffer, off, c, 0), 0, 0));
    else
      out->steps.push_back(withConns(step(StepKind::Send, kOutputBuffer, off, 0, 0, c, 0), child, 0));
  }
  if (received && sh.nchildren == 0) out->steps.push_back(step(StepKind::Recv, 0, 0, kOutputBuffer, off, c, 0));
}

}  // namespace

void buildTreeAllReduce(const TreeAllReduceShape& sh, ChannelSchedule* up, ChannelSchedule* down) {
  for (size_t done = 0; done < sh.count; done += sh.chunkElems) {
    size_t off = sh.offset + done, c = std::min(sh.chunkElems, sh.count - done);
    reduceUp(sh, off, c, up);
    if (sh.hasParent)
      sendDown(sh, off, c, /*received=*/true, down);
    else
      sendDown(sh, off, c, /*received=*/false, up);
  }
}

}  // namespace gyre
