#include "src/lower/wiring.h"

namespace gyre {

PlanContext planContextOf(const Wiring& w) {
  PlanContext ctx;
  ctx.nranks = w.nranks;
  ctx.minChannels = w.minChannels;
  ctx.ringChannels = static_cast<int>(w.channels.size());
  ctx.slotBytes = w.slotBytes;
  ctx.kernels = w.runsKernels && *w.runsKernels;
  ctx.trees = w.trees.size() == 2;
  ctx.doublingConnections = !w.doubling.send.empty();
  ctx.meshConnections = !w.mesh.send.empty();
  ctx.singleCopy = w.singleCopy;
  ctx.singleCopyAlways = w.singleCopyAlways;
  ctx.shmRings = w.shmRings;
  ctx.tuning = w.tuning;
  ctx.tuner = w.tuner;
  return ctx;
}

}  // namespace gyre
