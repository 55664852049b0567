#include "src/device/direct/direct_inprocess.h"

#include <stdio.h>

#include <map>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/call/coll_kind.h"
#include "src/debug/error.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/direct/direct_clique.h"
#include "src/device/direct/direct_share.h"
#include "src/device/flag_ops.h"
#include "src/device/launch_events.h"
#include "src/device/on_device.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"
#include "src/device/shared_streams.h"

namespace gyre {
namespace {

void destroyEvent(void* e) { deviceRuntime()->eventDestroy(e); }
void freeDevice(void* p) { freeAfterDeviceWork(DeferredFree::kDevice, p); }


// What ranks of one process post to their clique per call: their CallInfo,
// then that their share is queued (its done event recorded).
enum class Meeting : uint64_t { kCall = 0, kShareQueued = 1 };
uint64_t meetingKey(uint64_t callSeq, Meeting m) { return callSeq * 2 + static_cast<uint64_t>(m); }

// Every rank's record of meeting `m` of call `seq` (ranks of one process).
ncclResult_t meet(const DeviceRequest& c, uint64_t seq, Meeting m, std::vector<CallInfo>* out) {
  DeviceComm* comm = c.comm;
  Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
  int missing = -1;
  if (comm->direct->clique->collect(meetingKey(seq, m), deadline, &comm->abortFlag, out->data(), &missing))
    return ncclSuccess;
  const bool aborted = comm->abortFlag.load();
  char why[160];
  snprintf(why, sizeof(why), "%s; rank %d (of this process) has not made it (a call of another size, which runs "
           "as kernels, or none)", aborted ? "aborted" : "timed out", missing);
  return missedMeeting(c, aborted ? ncclInvalidUsage : ncclRemoteError, why);
}

// Ranks of one process order their streams by events, never by a wait on a
// value some other stream writes later: such a wait blocks its hardware queue,
// and a stream that shares the queue could never write it (the stream-flag
// protocol hung on an H100 this way). An event is always recorded before any
// stream waits on it, so each wait is for work already queued. Per call:
//   1. each rank records `ready` where its stream stands and posts the call;
//   2. after meeting, each waits for every peer's `ready`, queues its share,
//      records `done` and posts that;
//   3. after meeting again, each waits for every peer's `done`.
// A rank re-records its events only after every peer's waits on them are
// queued (the meetings order it), so one pair of events per rank serves every
// call, as long as the calls go one round at a time: `round` holds one call
// per communicator, the k-th direct call of each in the group. Calls
// captured into graphs meet by flags instead (enqueueCapturedCall), after
// the same meetings: their launches cannot wait on the peers' events.
ncclResult_t runInProcessRound(const std::vector<const DeviceRequest*>& round) {
  DeviceRuntime* rt = deviceRuntime();
  std::vector<CallInfo> mine(round.size());
  for (size_t k = 0; k < round.size(); ++k) {
    const DeviceRequest& c = *round[k];
    DirectState& d = *c.comm->direct;
    bool capturing = false;
    GYRE_CHECK(rt->isCapturing(c.stream, &capturing));
    mine[k] = describeCall(c, capturing);
    if (!capturing) {
      GYRE_CHECK(d.lastCall.followLast(c.stream));
      GYRE_CHECK(rt->eventRecord(d.clique->readyEvents[c.comm->rank], c.stream));
    }
    d.clique->post(c.comm->rank, meetingKey(mine[k].callSeq, Meeting::kCall), &mine[k]);
  }
  for (size_t k = 0; k < round.size(); ++k) {
    const DeviceRequest& c = *round[k];
    DeviceComm* comm = c.comm;
    DirectState& d = *comm->direct;
    std::vector<CallInfo> infos(comm->nranks);
    GYRE_CHECK(meet(c, mine[k].callSeq, Meeting::kCall, &infos));
    GYRE_CHECK(checkAgreement(comm, infos));
    std::vector<DirectCall> calls;
    GYRE_CHECK(buildDirectCalls(c, infos, &calls));
    if (mine[k].captured) {
      // takesDirect saw a free slot, but calls of one group took the last.
      if (!mine[k].capturedSlot)
        return fail(ncclInvalidUsage, "rank %d: %s: calls of its group took the last of the %u capture slots "
                    "of this communicator's direct path; later captured collectives run as kernels, so capture it "
                    "in a group of its own", comm->rank, describeInfo(mine[k]).c_str(), kCapturedDirectCalls);
      GYRE_CHECK(enqueueCapturedCall(comm, calls, mine[k].capturedSlot, c.stream, FlagRunner::kKernel));
      noteDirectRun(d, mine[k]);
      d.clique->post(comm->rank, meetingKey(mine[k].callSeq, Meeting::kShareQueued), &mine[k]);
      continue;
    }
    const bool observed = observedDeviceCalls(comm);
    void* callEvent = startDirectCallEvent(c, mine[k].callSeq, calls, observed);
    for (int p = 0; p < comm->nranks; ++p)
      if (p != comm->rank) GYRE_CHECK(rt->streamWaitEvent(c.stream, d.clique->readyEvents[p]));
    GYRE_CHECK(launchShares(c, calls, observed, callEvent));
    noteDirectRun(d, mine[k]);
    GYRE_CHECK(rt->eventRecord(d.clique->doneEvents[comm->rank], c.stream));
    d.clique->post(comm->rank, meetingKey(mine[k].callSeq, Meeting::kShareQueued), &mine[k]);
  }
  for (size_t k = 0; k < round.size(); ++k) {
    const DeviceRequest& c = *round[k];
    DeviceComm* comm = c.comm;
    DirectState& d = *comm->direct;
    std::vector<CallInfo> infos(comm->nranks);
    GYRE_CHECK(meet(c, mine[k].callSeq, Meeting::kShareQueued, &infos));
    if (!mine[k].captured)
      for (int p = 0; p < comm->nranks; ++p)
        if (p != comm->rank) GYRE_CHECK(rt->streamWaitEvent(c.stream, d.clique->doneEvents[p]));
    GYRE_CHECK(d.lastCall.note(c.stream));
    d.callsRun.fetch_add(1);
  }
  return ncclSuccess;
}

}  // namespace

bool allRanksInThisProcessOnThisGpu(const DeviceComm* comm) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const PeerInfo& self = peers[comm->rank];
  for (const PeerInfo& p : peers)
    if (p.hostHash != self.hostHash || p.busId != self.busId || p.pid != self.pid) return false;
  return true;
}

// Ranks of one process: rank 0 makes the clique, each rank adds its events,
// and every address is this process's own.
ncclResult_t setupInProcess(DeviceComm* comm, const Deadline& deadline) {
  DirectState& d = *comm->direct;
  std::vector<uint64_t> hellos(comm->nranks, 0);
  if (comm->rank == 0) hellos[0] = reinterpret_cast<uintptr_t>(new DirectClique(comm->nranks, sizeof(CallInfo)));
  GYRE_CHECK(comm->bootstrap->allGather(hellos.data(), sizeof(uint64_t), deadline, &comm->abortFlag));
  d.clique = reinterpret_cast<DirectClique*>(static_cast<uintptr_t>(hellos[0]));
  // From here on the clique destroys them.
  DeviceRuntime* rt = deviceRuntime();
  GYRE_CHECK(rt->eventCreate(&d.clique->readyEvents[comm->rank]));
  GYRE_CHECK(rt->eventCreate(&d.clique->doneEvents[comm->rank]));
  const size_t capturedBytes = capturedCallFlagWords(comm->nranks) * sizeof(uint32_t);
  void* inbox = nullptr;
  GYRE_CHECK(rt->deviceAlloc(capturedBytes, &inbox));
  d.clique->capturedInboxes[comm->rank] = static_cast<uint32_t*>(inbox);
  GYRE_CHECK(rt->memsetSync(inbox, 0, capturedBytes));
  GYRE_CHECK(d.flagWatch.allocate());
  // Every rank's events and flags exist before any rank's first call waits on them.
  GYRE_CHECK(comm->bootstrap->allGather(hellos.data(), sizeof(uint64_t), deadline, &comm->abortFlag));
  d.capturedFlags = d.clique->capturedInboxes;
  return ncclSuccess;
}

ncclResult_t launchInProcess(const std::vector<const DeviceRequest*>& calls) {
  // Captured calls meet through flag kernels that spin until every rank's arrives.
  std::vector<const DeviceRequest*> captured;
  for (const DeviceRequest* c : calls) {
    bool capturing = false;
    GYRE_CHECK(deviceRuntime()->isCapturing(c->stream, &capturing));
    if (capturing) captured.push_back(c);
  }
  GYRE_CHECK(refuseSharedStreams(captured, "ranks of one process on one GPU, captured direct collective"));
  // With one hardware queue every stream's commands run in one line: a
  // rank's graph that waits for its peers (a spinning kernel, and the
  // command after it waiting for that kernel) holds the line the peers'
  // graphs are queued in, and a fused kernel per rank (the kernel path)
  // deadlocks the same way on the event its launch records after it.
  if (!captured.empty() && captured.front()->comm->direct->oneHardwareQueue) {
    const DeviceRequest& c = *captured.front();
    return fail(ncclInvalidUsage, "rank %d: %s captured into a CUDA graph between ranks of one process cannot run "
                "under CUDA_DEVICE_MAX_CONNECTIONS=1: every stream shares one hardware queue, so a rank's graph "
                "waiting for its peers holds the queue their graphs need; set it above 1, call it uncaptured, or run "
                "each rank in a process of its own", c.comm->rank, collName(c.coll));
  }
  // Round k: the k-th call of each communicator, in group order.
  std::vector<std::vector<const DeviceRequest*>> rounds;
  std::map<DeviceComm*, size_t> callsOf;
  for (const DeviceRequest* c : calls) {
    size_t k = callsOf[c->comm]++;
    if (rounds.size() <= k) rounds.emplace_back();
    rounds[k].push_back(c);
  }
  // Every rank here shares one GPU, which need not be the caller's current one.
  const DeviceComm* first = calls.front()->comm;
  OnDevice onDevice;
  GYRE_CHECK(onDevice.enter(first->cudaDev, first->rank));
  for (const std::vector<const DeviceRequest*>& round : rounds) GYRE_CHECK(runInProcessRound(round));
  return ncclSuccess;
}

void releaseInProcess(DeviceComm* comm) { comm->direct->clique->release(destroyEvent, freeDevice); }

}  // namespace gyre
