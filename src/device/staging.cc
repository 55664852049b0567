#include "src/device/staging.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/runtime.h"
#include "src/enqueue/launch.h"
#include "src/enqueue/arg_checks.h"

namespace gyre {
namespace {

struct StagedCall {
  PendingCall host;          // the call on staging buffers, as the host executor runs it
  const void* deviceInput;
  void* deviceOutput;
  size_t inBytes = 0;        // copied device -> host before the job
  size_t outBytes = 0;       // copied host -> device after it
  void* stageIn = nullptr;
  void* stageOut = nullptr;
  size_t inCapacity = 0;     // real sizes of the staging buffers (for the pool)
  size_t outCapacity = 0;
  const void* deviceScalar = nullptr;  // an ncclScalarDevice operator's scalar, copied ...
  void* stageScalar = nullptr;         // ... here with the input
  size_t scalarCapacity = 0;
};

struct StagedJob {
  std::vector<StagedCall> calls;
  std::vector<ncclComm*> comms;  // distinct, each counted in its jobsInFlight
  // Captured into a CUDA graph: runs once per graph launch, so it keeps its
  // buffers and lives until its communicators are destroyed.
  bool captured = false;
};

// Bytes each side of a call moves (input read, output written) on this rank.
void stagedSizes(const PendingCall& c, size_t* in, size_t* out) {
  size_t bytes = c.count * datatypeSize(c.datatype);
  size_t n = static_cast<size_t>(c.comm->nranks);
  bool root = c.comm->rank == c.root;
  switch (c.coll) {
    case CollKind::AllReduce: *in = bytes; *out = bytes; return;
    case CollKind::Broadcast: *in = root ? bytes : 0; *out = bytes; return;  // sendbuff is read only at the root
    case CollKind::Reduce: *in = bytes; *out = root ? bytes : 0; return;      // recvbuff is written only at the root
    case CollKind::AllGather: *in = bytes; *out = bytes * n; return;
    case CollKind::ReduceScatter: *in = bytes * n; *out = bytes; return;
    case CollKind::SendRecv: *in = c.isSend ? bytes : 0; *out = c.isSend ? 0 : bytes; return;
  }
  *in = *out = 0;
}

// A host buffer of at least `bytes` from the communicator's pool; `capacity`
// is its real size, under which it goes back to the pool.
ncclResult_t takeBuffer(ncclComm* comm, size_t bytes, void** out, size_t* capacity) {
  StagingState& s = *comm->staging;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto best = s.freeBuffers.end();
    for (auto it = s.freeBuffers.begin(); it != s.freeBuffers.end(); ++it)
      if (it->first >= bytes && (best == s.freeBuffers.end() || it->first < best->first)) best = it;
    if (best != s.freeBuffers.end()) {
      *capacity = best->first;
      *out = best->second;
      s.freeBuffers.erase(best);
      return ncclSuccess;
    }
  }
  *capacity = std::max<size_t>(bytes, 4096);
  GYRE_CHECK(deviceRuntime()->allocHost(*capacity, out));
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allBuffers.push_back(*out);
  return ncclSuccess;
}

// Host functions may not call the runtime: these only touch host state.
void runJob(void* arg) {
  auto* job = static_cast<StagedJob*>(arg);
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<ncclComm*> order = job->comms;
  std::sort(order.begin(), order.end());  // a fixed order, so two jobs never lock crosswise
  for (ncclComm* c : order) locks.emplace_back(c->staging->executorMutex);
  std::vector<PendingCall> calls;
  for (const StagedCall& c : job->calls) calls.push_back(c.host);
  ncclResult_t r = runHostCalls(calls);
  if (r != ncclSuccess) {
    // The failing rank already marked its communicators; make sure each one
    // of this job reports the error through ncclCommGetAsyncError.
    std::string why = lastErrorText();
    for (ncclComm* c : job->comms) {
      int expected = ncclSuccess;
      if (c->asyncError.compare_exchange_strong(expected, r)) {
        std::lock_guard<std::mutex> lock(c->errorMutex);
        c->errorText = why;
      }
    }
    GYRE_WARN("staged collective failed: %s", why.c_str());
  }
}

// Each run of a captured job counts as in flight from its first node on.
void beginCapturedJob(void* arg) {
  for (ncclComm* comm : static_cast<StagedJob*>(arg)->comms) {
    std::lock_guard<std::mutex> lock(comm->staging->mutex);
    ++comm->staging->jobsInFlight;
  }
}

void endCapturedJob(void* arg) {
  for (ncclComm* comm : static_cast<StagedJob*>(arg)->comms) {
    StagingState& s = *comm->staging;
    std::lock_guard<std::mutex> lock(s.mutex);
    --s.jobsInFlight;
    s.idle.notify_all();
  }
}

void finishJob(void* arg) {
  std::unique_ptr<StagedJob> job(static_cast<StagedJob*>(arg));
  for (const StagedCall& c : job->calls) {
    StagingState& s = *c.host.comm->staging;
    std::lock_guard<std::mutex> lock(s.mutex);
    s.freeBuffers.push_back({c.inCapacity, c.stageIn});
    s.freeBuffers.push_back({c.outCapacity, c.stageOut});
    if (c.stageScalar) s.freeBuffers.push_back({c.scalarCapacity, c.stageScalar});
  }
  for (ncclComm* comm : job->comms) {
    StagingState& s = *comm->staging;
    std::lock_guard<std::mutex> lock(s.mutex);
    --s.jobsInFlight;
    s.idle.notify_all();
  }
}

// The call's device input (and device-resident scalar) to its host buffers.
ncclResult_t copyInputs(DeviceRuntime* rt, const StagedCall& s) {
  if (s.inBytes) GYRE_CHECK(rt->copyAsync(s.stageIn, s.deviceInput, s.inBytes, s.host.stream));
  if (s.deviceScalar)
    GYRE_CHECK(rt->copyAsync(s.stageScalar, s.deviceScalar, datatypeSize(s.host.datatype), s.host.stream));
  return ncclSuccess;
}

// Makes `waiter` wait for all work issued so far on `signaler`.
ncclResult_t joinStreams(DeviceRuntime* rt, StreamHandle signaler, StreamHandle waiter) {
  EventHandle e = nullptr;
  GYRE_CHECK(rt->eventCreate(&e));
  ncclResult_t r = rt->eventRecord(e, signaler);
  if (r == ncclSuccess) r = rt->streamWaitEvent(waiter, e);
  rt->eventDestroy(e);  // released once the recorded work completes
  return r;
}

// Joins every stream but `driver` into it (intoDriver) or it into them.
ncclResult_t joinOthers(DeviceRuntime* rt, const std::vector<StreamHandle>& streams, StreamHandle driver,
                        bool intoDriver) {
  for (StreamHandle s : streams)
    if (s != driver) GYRE_CHECK(intoDriver ? joinStreams(rt, s, driver) : joinStreams(rt, driver, s));
  return ncclSuccess;
}

// After the job: the output copies on each call's stream, then, on the
// driver once every stream's copies are done, the buffers' return.
ncclResult_t enqueueOutputs(DeviceRuntime* rt, const StagedJob& job, const std::vector<StreamHandle>& streams,
                            StreamHandle driver) {
  GYRE_CHECK(joinOthers(rt, streams, driver, false));
  for (const StagedCall& s : job.calls)
    if (s.outBytes) GYRE_CHECK(rt->copyAsync(s.deviceOutput, s.stageOut, s.outBytes, s.host.stream));
  return joinOthers(rt, streams, driver, true);
}

// The same nodes into a graph being captured, bracketed by begin/end nodes
// that count each launch in flight; the job (and its buffers, never returned
// to the pool) belongs to its communicators from now on.
ncclResult_t launchCapturedJob(DeviceRuntime* rt, std::unique_ptr<StagedJob> job,
                               const std::vector<StreamHandle>& streams, StreamHandle driver) {
  StagedJob* raw = job.get();
  std::shared_ptr<StagedJob> owned(job.release());
  for (ncclComm* comm : raw->comms) {
    std::lock_guard<std::mutex> lock(comm->staging->mutex);
    comm->staging->capturedJobs.push_back(owned);
  }
  GYRE_CHECK(rt->hostFunc(driver, beginCapturedJob, raw));
  for (const StagedCall& s : raw->calls)
    GYRE_CHECK(copyInputs(rt, s));
  GYRE_CHECK(joinOthers(rt, streams, driver, true));
  GYRE_CHECK(rt->hostFunc(driver, runJob, raw));
  GYRE_CHECK(enqueueOutputs(rt, *raw, streams, driver));
  return rt->hostFunc(driver, endCapturedJob, raw);
}

}  // namespace

ncclResult_t launchStagedCalls(const std::vector<PendingCall>& calls) {
  DeviceRuntime* rt = deviceRuntime();
  if (!rt) return fail(ncclInvalidUsage, "device collectives need the CUDA runtime, which this build lacks");
  auto job = std::make_unique<StagedJob>();
  for (const PendingCall& c : calls) {
    bool capturing = false;
    GYRE_CHECK(rt->isCapturing(c.stream, &capturing));
    job->captured |= capturing;
  }
  std::vector<StreamHandle> streams;
  for (const PendingCall& c : calls) {
    StagedCall s;
    s.host = c;
    s.deviceInput = c.input;
    s.deviceOutput = c.output;
    stagedSizes(c, &s.inBytes, &s.outBytes);
    // Both buffers get the larger side's size: the executor wants valid
    // pointers even where a side moves no bytes (a Broadcast's non-root input).
    size_t need = std::max(s.inBytes, s.outBytes);
    GYRE_CHECK(takeBuffer(c.comm, need, &s.stageIn, &s.inCapacity));
    GYRE_CHECK(takeBuffer(c.comm, need, &s.stageOut, &s.outCapacity));
    s.host.input = s.stageIn;
    s.host.output = s.stageOut;
    if (c.op >= ncclNumOps && c.coll != CollKind::SendRecv && c.comm->customOps[c.op - ncclNumOps].scalarPtr) {
      s.deviceScalar = c.comm->customOps[c.op - ncclNumOps].scalarPtr;
      GYRE_CHECK(takeBuffer(c.comm, datatypeSize(c.datatype), &s.stageScalar, &s.scalarCapacity));
      s.host.stagedScalar = s.stageScalar;
    }
    job->calls.push_back(s);
    if (std::find(job->comms.begin(), job->comms.end(), c.comm) == job->comms.end()) job->comms.push_back(c.comm);
    if (std::find(streams.begin(), streams.end(), c.stream) == streams.end()) streams.push_back(c.stream);
  }
  StreamHandle driver = calls.front().stream;
  if (job->captured) return launchCapturedJob(rt, std::move(job), streams, driver);
  for (const StagedCall& s : job->calls)
    GYRE_CHECK(copyInputs(rt, s));
  GYRE_CHECK(joinOthers(rt, streams, driver, true));
  for (ncclComm* comm : job->comms) {
    std::lock_guard<std::mutex> lock(comm->staging->mutex);
    ++comm->staging->jobsInFlight;
  }
  StagedJob* raw = job.release();
  ncclResult_t r = rt->hostFunc(driver, runJob, raw);
  if (r != ncclSuccess) {
    finishJob(raw);
    return r;
  }
  // finishJob is queued even when an output copy could not be: the job is
  // on the stream, and its communicators count it until finishJob runs.
  ncclResult_t outputs = enqueueOutputs(rt, *raw, streams, driver);
  ncclResult_t finish = rt->hostFunc(driver, finishJob, raw);
  return outputs != ncclSuccess ? outputs : finish;
}

bool drainStaging(ncclComm* comm, double seconds) {
  if (!comm->staging) return true;
  StagingState& s = *comm->staging;
  std::unique_lock<std::mutex> lock(s.mutex);
  bool drained = s.idle.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return s.jobsInFlight == 0; });
  if (!drained) return false;
  DeviceRuntime* rt = deviceRuntime();
  for (void* p : s.allBuffers)
    if (rt) rt->freeHost(p);
  s.allBuffers.clear();
  s.freeBuffers.clear();
  s.capturedJobs.clear();  // their graphs must not run again (as with NCCL, destroy after the graphs)
  return true;
}

}  // namespace gyre
