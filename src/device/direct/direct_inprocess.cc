#include "src/device/direct/direct_inprocess.h"

#include <stdio.h>

#include <map>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/direct/direct_clique.h"
#include "src/device/direct/direct_share.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

void destroyEvent(void* e) { deviceRuntime()->eventDestroy(e); }

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
// per communicator, the k-th direct call of each in the group.
ncclResult_t runInProcessRound(const std::vector<const DeviceRequest*>& round) {
  DeviceRuntime* rt = deviceRuntime();
  std::vector<CallInfo> mine(round.size());
  for (size_t k = 0; k < round.size(); ++k) {
    const DeviceRequest& c = *round[k];
    DirectState& d = *c.comm->direct;
    mine[k] = describeCall(c, false);  // takesDirect kept captures away
    GYRE_CHECK(d.lastCall.followLast(c.stream));
    GYRE_CHECK(rt->eventRecord(d.clique->readyEvents[c.comm->rank], c.stream));
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
    for (int p = 0; p < comm->nranks; ++p)
      if (p != comm->rank) GYRE_CHECK(rt->streamWaitEvent(c.stream, d.clique->readyEvents[p]));
    for (const DirectCall& call : calls) GYRE_CHECK(rt->launchDirect(call, c.stream));
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
  GYRE_CHECK(deviceRuntime()->eventCreate(&d.clique->readyEvents[comm->rank]));
  GYRE_CHECK(deviceRuntime()->eventCreate(&d.clique->doneEvents[comm->rank]));
  // Every rank's events exist before any rank's first call waits on them.
  return comm->bootstrap->allGather(hellos.data(), sizeof(uint64_t), deadline, &comm->abortFlag);
}

ncclResult_t launchInProcess(const std::vector<const DeviceRequest*>& calls) {
  // Round k: the k-th call of each communicator, in group order.
  std::vector<std::vector<const DeviceRequest*>> rounds;
  std::map<DeviceComm*, size_t> callsOf;
  for (const DeviceRequest* c : calls) {
    size_t k = callsOf[c->comm]++;
    if (rounds.size() <= k) rounds.emplace_back();
    rounds[k].push_back(c);
  }
  for (const std::vector<const DeviceRequest*>& round : rounds) GYRE_CHECK(runInProcessRound(round));
  return ncclSuccess;
}

void releaseInProcess(DeviceComm* comm) { comm->direct->clique->release(destroyEvent); }

}  // namespace gyre
