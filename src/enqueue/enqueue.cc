#include "src/enqueue/enqueue.h"

#include <mutex>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"
#include "src/plan/planner.h"
#include "src/sched/build_ring_allreduce.h"

namespace gyre {
namespace {

// Counts a call as in flight so ncclCommAbort waits for it to leave.
class ActiveCall {
 public:
  explicit ActiveCall(ncclComm* comm) : comm_(comm) { comm_->activeCalls.fetch_add(1); }
  ~ActiveCall() { comm_->activeCalls.fetch_sub(1); }

 private:
  ncclComm* comm_;
};

ncclResult_t buildSchedule(ncclComm* comm, const CollCall& call, const Plan& plan, ChannelSchedule* out) {
  out->steps.clear();
  switch (call.coll) {
    case CollKind::AllReduce:
      buildRingAllReduce({comm->rank, comm->nranks, call.count, plan.chunkElems, plan.alignElems}, out);
      return ncclSuccess;
    default:
      return fail(ncclInternalError, "%s has no schedule builder", collName(call.coll));
  }
}

}  // namespace

ncclResult_t enqueueCollective(ncclComm* comm, CollCall call) {
  ActiveCall active(comm);
  if (comm->abortFlag.load()) return fail(ncclInvalidUsage, "%s: the communicator was aborted", collName(call.coll));
  if (int err = comm->asyncError.load(); err != ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    return fail(static_cast<ncclResult_t>(err), "%s: the communicator failed earlier: %s", collName(call.coll),
                comm->errorText.c_str());
  }
  if (!comm->isHost)
    return fail(ncclInvalidUsage, "%s: collectives on device communicators are not available in this build yet; "
                                  "create the communicator with gyreCommInitRankHost and pass host buffers",
                collName(call.coll));
  if (call.count == 0) return ncclSuccess;
  call.opCount = ++comm->opCount;
  size_t typeSize = datatypeSize(call.datatype);
  Plan plan;
  GYRE_CHECK(planCollective(comm, call.coll, call.count, typeSize, &plan));
  GYRE_CHECK(buildSchedule(comm, call, plan, &comm->scratch));
  GYRE_TRACE("COLL", "%s #%llu count %zu %s %s: %s/%s, %zu steps", collName(call.coll),
             static_cast<unsigned long long>(call.opCount), call.count, datatypeName(call.datatype),
             redOpName(call.op), algorithmName(plan.algorithm), protocolName(plan.protocol),
             comm->scratch.steps.size());
  return runHostSchedule(comm, call, comm->channels[0], comm->scratch);
}

}  // namespace gyre
