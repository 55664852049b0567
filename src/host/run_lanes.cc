// The executor's main loop: interleave lanes until all are done, then wait
// until every send has left this rank.
#include <poll.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "src/debug/deadline.h"
#include "src/host/executor.h"

namespace gyre {
namespace {

constexpr int kPollSliceMs = 50;  // also bounds how late an abort is noticed

struct Waiter {
  std::vector<ncclComm*> comms;
  std::vector<pollfd> fds;
  int spinsBeforeBlocking = 0;
  double timeoutSeconds = 0;

  explicit Waiter(const std::vector<std::unique_ptr<Lane>>& lanes) {
    for (const auto& l : lanes)
      if (std::find(comms.begin(), comms.end(), l->spec().comm) == comms.end()) comms.push_back(l->spec().comm);
    spinsBeforeBlocking = comms.empty() ? 0 : comms[0]->spinsBeforeBlocking;
    timeoutSeconds = comms.empty() ? 1 : comms[0]->collTimeoutSeconds;
    for (ncclComm* c : comms) {
      spinsBeforeBlocking = std::min(spinsBeforeBlocking, c->spinsBeforeBlocking);
      timeoutSeconds = std::min(timeoutSeconds, c->collTimeoutSeconds);
    }
  }

  // Moves bytes on every communicator's transports.
  ncclResult_t progress() {
    for (ncclComm* c : comms) {
      int culprit = -1;
      ncclResult_t r = c->progress.progressAll(&culprit);
      if (r != ncclSuccess) {
        markCommFailed(c, r, culprit);
        return r;
      }
    }
    return ncclSuccess;
  }

  ncclResult_t checkAborted(const char* what) {
    for (ncclComm* c : comms)
      if (c->abortFlag.load(std::memory_order_relaxed))
        return fail(ncclInvalidUsage, "%s: the communicator of rank %d was aborted (ncclCommAbort)", what, c->rank);
    return ncclSuccess;
  }

  void sleep(const Deadline& deadline) {
    fds.clear();
    for (ncclComm* c : comms) c->progress.appendPollFds(&fds);
    int ms = deadline.remainingMs(kPollSliceMs);
    if (fds.empty()) std::this_thread::yield();
    else poll(fds.data(), fds.size(), ms);
  }
};

ncclResult_t describeStall(const Lane& lane, const Connection* conn, double seconds, bool peerClosed) {
  const LaneSpec& s = lane.spec();
  const PeerInfo& p = s.comm->bootstrap->peers()[conn->peer];
  ncclResult_t r;
  if (peerClosed)
    r = fail(ncclRemoteError,
             "%s #%llu (channel %d, step %zu of %zu): rank %d (%s pid %d) closed its connection before sending the "
             "data this rank needs; it died, aborted or left the collective",
             collName(s.coll), static_cast<unsigned long long>(s.opCount), s.channel, lane.nextStep() + 1, s.nsteps,
             conn->peer, p.host, p.pid);
  else
    r = fail(ncclRemoteError,
             "%s #%llu (channel %d, step %zu of %zu): waited %.0f s (GYRE_TIMEOUT) for %s rank %d (%s pid %d); it "
             "is stalled, dead, or not making the same call",
             collName(s.coll), static_cast<unsigned long long>(s.opCount), s.channel, lane.nextStep() + 1, s.nsteps,
             seconds, conn->isSend ? "buffer space at" : "data from", conn->peer, p.host, p.pid);
  markCommFailed(s.comm, r, conn->peer);
  return r;
}

// A lane waiting for data from a peer that closed its connection can never finish.
ncclResult_t checkClosedPeers(const std::vector<std::unique_ptr<Lane>>& lanes) {
  for (const auto& l : lanes) {
    const Connection* c = l->blockingConnection();
    if (c && !c->isSend && c->peerClosed) return describeStall(*l, c, 0, true);
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t runLanes(std::vector<std::unique_ptr<Lane>>& lanes) {
  Waiter waiter(lanes);
  Deadline deadline = Deadline::afterSeconds(waiter.timeoutSeconds);
  for (int idle = 0;;) {
    // Transports first, lanes second: whatever progress() just received is
    // consumed before deciding to sleep, because poll() would not report data
    // that has already left the socket.
    GYRE_CHECK(waiter.progress());
    bool progressed = false, allDone = true;
    for (auto& lane : lanes) {
      GYRE_CHECK(lane->advance(&progressed));
      allDone &= lane->done();
    }
    if (allDone) break;
    if (progressed) {
      idle = 0;
      deadline = Deadline::afterSeconds(waiter.timeoutSeconds);
      continue;
    }
    GYRE_CHECK(checkClosedPeers(lanes));
    GYRE_CHECK(waiter.checkAborted(collName(lanes[0]->spec().coll)));
    if (++idle <= waiter.spinsBeforeBlocking) continue;
    if (deadline.expired()) {
      for (const auto& l : lanes)
        if (const Connection* c = l->blockingConnection()) return describeStall(*l, c, waiter.timeoutSeconds, false);
    }
    waiter.sleep(deadline);
  }
  // The call returns only when its data has left this rank's buffers.
  for (;;) {
    bool drained = true;
    for (const auto& l : lanes)
      for (size_t i = 0; i < l->spec().nsend; ++i) drained &= sendsDrained(*l->spec().send[i]);
    if (drained) return ncclSuccess;
    GYRE_CHECK(waiter.progress());
    drained = true;
    for (const auto& l : lanes)
      for (size_t i = 0; i < l->spec().nsend; ++i) drained &= sendsDrained(*l->spec().send[i]);
    if (drained) return ncclSuccess;
    GYRE_CHECK(waiter.checkAborted(collName(lanes[0]->spec().coll)));
    if (deadline.expired()) {
      for (const auto& l : lanes)
        for (size_t i = 0; i < l->spec().nsend; ++i)
          if (!sendsDrained(*l->spec().send[i])) return describeStall(*l, l->spec().send[i], waiter.timeoutSeconds, false);
    }
    waiter.sleep(deadline);
  }
}

}  // namespace gyre
