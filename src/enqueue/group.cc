// ncclGroupStart / ncclGroupEnd: a per-thread depth and list of calls. Nested
// groups merge into the outermost; its end runs everything at once.
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/device/on_device.h"
#include "src/device/runtime/runtime.h"
#include "src/enqueue/enqueue.h"
#include "src/enqueue/launch.h"

namespace gyre {
namespace {

// The depth alone is read by every call (a plain __thread int: one TLS
// load); the rest only inside groups.
__thread int depth = 0;

struct SetupTask {
  ncclComm* comm;
  std::function<ncclResult_t()> run;
};

struct GroupState {
  std::vector<PendingCall> calls;
  std::vector<SetupTask> setups;  // runOrDefer's tasks, in call order
  ncclResult_t firstError = ncclSuccess;  // an argument error inside the group fails its end too
};

thread_local GroupState group;

// The group's set-up tasks: each communicator's in call order on a thread
// of its own, the communicators at once (they may be the ranks of one
// meeting). A communicator's first failure stops its later tasks; the
// first failure is re-recorded on this thread.
ncclResult_t runSetups(std::vector<SetupTask>* setups) {
  if (setups->empty()) return ncclSuccess;
  std::vector<ncclComm*> comms;
  for (const SetupTask& t : *setups)
    if (std::find(comms.begin(), comms.end(), t.comm) == comms.end()) comms.push_back(t.comm);
  std::vector<ncclResult_t> results(comms.size(), ncclSuccess);
  std::vector<std::string> texts(comms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < comms.size(); ++i)
    threads.emplace_back([&, i] {
      // A task allocates and maps on its communicator's device.
      enterDeviceOfThisThread(comms[i]->isHost ? -1 : comms[i]->cudaDev);
      for (SetupTask& t : *setups) {
        if (t.comm != comms[i]) continue;
        results[i] = t.run();
        if (results[i] != ncclSuccess) {
          texts[i] = lastErrorText();
          return;
        }
      }
    });
  for (std::thread& t : threads) t.join();
  setups->clear();
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i] != ncclSuccess) return recordFailure(results[i], texts[i].c_str());
  return ncclSuccess;
}

}  // namespace

int groupDepth() { return depth; }

ncclResult_t groupStart() {
  ++depth;
  observeGroupStart(depth);
  return ncclSuccess;
}

ncclResult_t groupEnd() {
  if (depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  if (--depth > 0) return ncclSuccess;
  std::vector<SetupTask> setups;
  setups.swap(group.setups);
  std::vector<PendingCall> calls;
  calls.swap(group.calls);
  ncclResult_t setUp = runSetups(&setups);
  if (setUp != ncclSuccess) {
    group.firstError = ncclSuccess;
    return setUp;
  }
  GroupEndScope observed;
  for (const PendingCall& c : calls) observed.add(c.comm->observer);
  ncclResult_t earlier = group.firstError;
  group.firstError = ncclSuccess;
  if (earlier != ncclSuccess) return earlier;  // the failing call already recorded its message
  return launchCalls(calls);
}

ncclResult_t groupSimulateEnd(std::vector<PendingCall>* calls) {
  calls->clear();
  if (depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupSimulateEnd called without a matching ncclGroupStart");
  if (--depth > 0) return ncclSuccess;
  GroupEndScope observed;  // closes the group's range and events; no call ran
  calls->swap(group.calls);
  // Set-up is not simulated: its results are needed after the group.
  std::vector<SetupTask> setups;
  setups.swap(group.setups);
  GYRE_CHECK(runSetups(&setups));
  ncclResult_t earlier = group.firstError;
  group.firstError = ncclSuccess;
  return earlier;
}

namespace {

// Whether a device call's stream is capturing a CUDA graph, asked only for
// a profiler's API events (a query per call otherwise saved).
bool capturedForProfiler(const ncclComm* comm, const CollCall& args) {
  if (!comm->observer.profilerMask || comm->isHost) return false;
  DeviceRuntime* rt = deviceRuntime();
  bool capturing = false;
  return rt && rt->isCapturing(args.stream, &capturing) == ncclSuccess && capturing;
}

}  // namespace

ncclResult_t enqueue(ncclComm* comm, const CollCall& args) {
  ApiCallScope observed(comm->observer, args, depth, capturedForProfiler(comm, args));
  PendingCall call;
  static_cast<CollCall&>(call) = args;
  call.comm = comm;
  if (args.op >= ncclNumOps && args.coll != CollKind::SendRecv) {
    const CustomRedOp& custom = comm->customOps[args.op - ncclNumOps];
    call.scalar.present = true;
    call.scalar.devicePtr = custom.scalarPtr;
    memcpy(call.scalar.value, custom.value, sizeof(call.scalar.value));
  }
  if (depth > 0) {
    group.calls.push_back(call);
    return ncclSuccess;
  }
  return launchLoneCall(call);
}

ncclResult_t runOrDefer(ncclComm* comm, std::function<ncclResult_t()> task) {
  if (depth == 0) return task();
  group.setups.push_back(SetupTask{comm, std::move(task)});
  return ncclSuccess;
}

// Argument errors inside a group are returned by the call and remembered for ncclGroupEnd.
void noteGroupError(ncclResult_t r) {
  if (depth > 0 && group.firstError == ncclSuccess) group.firstError = r;
}

}  // namespace gyre
