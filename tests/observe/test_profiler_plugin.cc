// A recording NCCL profiler plugin for the tests, built against gyre's own
// description of the interface (src/observe/profiler_v5.h). It exports
// ncclProfiler_v5 (or, built with -DGYRETEST_PROFILER_V99, only a table
// named ncclProfiler_v99 that gyre must refuse). Each event becomes a line
// of text; gyretest_profiler_log() returns them, gyretest_profiler_counts()
// the init and finalize calls. GYRETEST_PROFILER_INIT_FAIL=1 makes init
// fail; GYRETEST_PROFILER_MASK sets the activation mask (default: the
// group, collective, point-to-point and API events).
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>

#include "src/observe/profiler_v5.h"

using namespace gyre::profiler;

namespace {

struct Event {
  int id;
  uint64_t type;
  bool stopped = false;
};

std::mutex mu;
std::deque<Event> events;  // stable addresses: the handles
std::string logText;
int inits = 0, finalizes = 0;
int contextTag = 0;  // the context handed out (its address)

std::string str(const char* s) { return s ? s : "(null)"; }

int idOf(void* handle) { return handle ? static_cast<Event*>(handle)->id : 0; }

ncclResult_t init(void** context, uint64_t commId, int* mask, const char*, int nNodes, int nranks, int rank,
                  Logger logfn) {
  const char* fail = getenv("GYRETEST_PROFILER_INIT_FAIL");
  if (fail && fail[0] == '1') return ncclInternalError;
  std::lock_guard<std::mutex> lock(mu);
  ++inits;
  *context = &contextTag;
  const char* m = getenv("GYRETEST_PROFILER_MASK");
  *mask = m ? atoi(m) : (kGroup | kColl | kP2p | kGroupApi | kCollApi | kP2pApi);
  char line[200];
  snprintf(line, sizeof line, "init comm=%016llx nodes=%d ranks=%d rank=%d logger=%d\n",
           static_cast<unsigned long long>(commId), nNodes, nranks, rank, logfn != nullptr);
  logText += line;
  if (logfn) logfn(3, 0, __FILE__, __LINE__, "gyretest profiler: init for rank %d", rank);
  return ncclSuccess;
}

ncclResult_t startEvent(void* context, void** handle, EventDescr* d) {
  std::lock_guard<std::mutex> lock(mu);
  if (context != &contextTag) {
    logText += "error: startEvent with a context init did not hand out\n";
    *handle = nullptr;
    return ncclSuccess;
  }
  events.push_back({static_cast<int>(events.size()) + 1, d->type});
  Event& e = events.back();
  *handle = &e;
  std::string line = "start " + std::to_string(e.id) + " parent=" + std::to_string(idOf(d->parentObj)) +
                     " rank=" + std::to_string(d->rank) + " ";
  switch (d->type) {
    case kGroupApi:
      line += "GroupApi depth=" + std::to_string(d->groupApi.groupDepth) +
              " captured=" + std::to_string(d->groupApi.graphCaptured ? 1 : 0);
      break;
    case kCollApi:
      line += "CollApi func=" + str(d->collApi.func) + " count=" + std::to_string(d->collApi.count) +
              " datatype=" + str(d->collApi.datatype) + " root=" + std::to_string(d->collApi.root) +
              " captured=" + std::to_string(d->collApi.graphCaptured ? 1 : 0);
      break;
    case kP2pApi:
      line += "P2pApi func=" + str(d->p2pApi.func) + " count=" + std::to_string(d->p2pApi.count) +
              " datatype=" + str(d->p2pApi.datatype) + " captured=" + std::to_string(d->p2pApi.graphCaptured ? 1 : 0);
      break;
    case kGroup: line += "Group"; break;
    case kColl:
      line += "Coll func=" + str(d->coll.func) + " seq=" + std::to_string(d->coll.seqNumber) +
              " count=" + std::to_string(d->coll.count) + " datatype=" + str(d->coll.datatype) +
              " root=" + std::to_string(d->coll.root) + " algo=" + str(d->coll.algo) + " proto=" + str(d->coll.proto) +
              " nChannels=" + std::to_string(d->coll.nChannels) + " group=" + std::to_string(idOf(d->coll.parentGroup));
      break;
    case kP2p:
      line += "P2p func=" + str(d->p2p.func) + " count=" + std::to_string(d->p2p.count) +
              " datatype=" + str(d->p2p.datatype) + " peer=" + std::to_string(d->p2p.peer) +
              " nChannels=" + std::to_string(d->p2p.nChannels) + " group=" + std::to_string(idOf(d->p2p.parentGroup));
      break;
    case kProxyOp:
      line += "ProxyOp channel=" + std::to_string(d->proxyOp.channelId) + " peer=" + std::to_string(d->proxyOp.peer) +
              " nSteps=" + std::to_string(d->proxyOp.nSteps) + " chunkSize=" + std::to_string(d->proxyOp.chunkSize) +
              " isSend=" + std::to_string(d->proxyOp.isSend) + " pid=" + std::to_string(d->proxyOp.pid);
      break;
    case kProxyStep: line += "ProxyStep step=" + std::to_string(d->proxyStep.step); break;
    case kKernelLaunch: line += "KernelLaunch stream=" + std::to_string(reinterpret_cast<uintptr_t>(d->kernelLaunch.stream)); break;
    case kKernelCh:
      line += "KernelCh channel=" + std::to_string(d->kernelCh.channelId) + " pTimer=" + std::to_string(d->kernelCh.pTimer);
      break;
    default: line += "type=" + std::to_string(d->type);
  }
  logText += line + "\n";
  return ncclSuccess;
}

ncclResult_t stopEvent(void* handle) {
  std::lock_guard<std::mutex> lock(mu);
  Event* e = static_cast<Event*>(handle);
  logText += "stop " + std::to_string(e->id) + (e->stopped ? " again" : "") + "\n";
  e->stopped = true;
  return ncclSuccess;
}

ncclResult_t recordEventState(void* handle, int state, EventStateArgs* args) {
  std::lock_guard<std::mutex> lock(mu);
  std::string extra;
  const uint64_t type = handle ? static_cast<Event*>(handle)->type : 0;
  if (args && type == kProxyStep) extra = " bytes=" + std::to_string(args->proxyStep.transSize);
  if (args && type == kKernelCh) extra = " pTimer=" + std::to_string(args->kernelCh.pTimer);
  logText += "state " + std::to_string(idOf(handle)) + " " + std::to_string(state) + extra + "\n";
  return ncclSuccess;
}

ncclResult_t finalize(void* context) {
  std::lock_guard<std::mutex> lock(mu);
  if (context != &contextTag) logText += "error: finalize with a context init did not hand out\n";
  ++finalizes;
  logText += "finalize\n";
  return ncclSuccess;
}

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))

#ifdef GYRETEST_PROFILER_V99
EXPORT const PluginV5 ncclProfiler_v99 = {"GyreTestProfiler", init, startEvent, stopEvent, recordEventState,
                                          finalize};
#else
EXPORT const PluginV5 ncclProfiler_v5 = {"GyreTestProfiler", init, startEvent, stopEvent, recordEventState,
                                         finalize};
#endif

EXPORT const char* gyretest_profiler_log() {
  std::lock_guard<std::mutex> lock(mu);
  static std::string copy;
  copy = logText;
  return copy.c_str();
}

EXPORT void gyretest_profiler_counts(int* initCalls, int* finalizeCalls) {
  std::lock_guard<std::mutex> lock(mu);
  *initCalls = inits;
  *finalizeCalls = finalizes;
}
