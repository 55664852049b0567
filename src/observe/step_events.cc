#include "src/observe/step_events.h"

#include <unistd.h>

#include "src/observe/observer.h"
#include "src/observe/profiler_plugin.h"

namespace gyre::stepev {
namespace {

profiler::EventDescr descr(const CommObserver& o, int type, void* parent) {
  profiler::EventDescr d{};
  d.type = static_cast<uint64_t>(type);
  d.parentObj = parent;
  d.rank = o.rank;
  return d;
}

}  // namespace

void* startOp(CommObserver* o, void* parent, int channel, int peer, bool isSend, int nSteps, int chunkBytes) {
  if (!(o->profilerMask & profiler::kProxyOp)) return nullptr;
  profiler::EventDescr d = descr(*o, profiler::kProxyOp, parent);
  d.proxyOp.pid = getpid();  // not cached: ranks are often forked from one process
  d.proxyOp.channelId = static_cast<uint8_t>(channel);
  d.proxyOp.peer = peer;
  d.proxyOp.nSteps = nSteps;
  d.proxyOp.chunkSize = chunkBytes;
  d.proxyOp.isSend = isSend ? 1 : 0;
  return profiler::start(o->profilerContext, &d);
}

void stopOp(void* op) { profiler::stop(op); }

void* startStep(CommObserver* o, void* op, int step, bool isSend) {
  if (!(o->profilerMask & profiler::kProxyStep)) return nullptr;
  profiler::EventDescr d = descr(*o, profiler::kProxyStep, op);
  d.proxyStep.step = step;
  void* h = profiler::start(o->profilerContext, &d);
  // Waiting for the peer's buffer space (a send) or its data (a receive).
  profiler::recordState(h, isSend ? profiler::kProxyStepSendPeerWait : profiler::kProxyStepRecvWait);
  return h;
}

void endStep(void* step, bool isSend, size_t bytes) {
  if (!step) return;
  profiler::EventStateArgs args{};
  args.proxyStep.transSize = bytes;
  // A send's chunk is in the peer's buffer (in flight for a network
  // transport); a receive's chunk has been consumed by the lane.
  profiler::recordState(step, isSend ? profiler::kProxyStepSendWait : profiler::kProxyStepRecvGPUWait, &args);
  profiler::stop(step);
}

}  // namespace gyre::stepev
