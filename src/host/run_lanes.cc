// The executor's main loop: interleave lanes until all are done, then wait
// until every send has left this rank.
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <bitset>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "src/debug/deadline.h"
#include "src/debug/error.h"
#include "src/debug/thread_owned.h"
#include "src/host/executor.h"
#include "src/host/foreign_steps.h"
#include "src/host/peer_credits.h"
#include "src/host/lane_trace.h"

namespace gyre {
namespace {

constexpr int kPollSliceMs = 50;  // also bounds how late an abort or a dead peer is noticed
// How long a waiting rank yields its core before it sleeps (on a futex when
// it waits on shared memory only, else in poll(); sockets yield too, which
// took 4 socket ranks on 2 cores from ~104 to ~80 us at 8 B). A peer on another core posts its next step within
// microseconds of finishing the last; a futex sleep costs the waker a system
// call and the sleeper a wake-up of about 10 us, so with a core each it pays
// to wait a while (2 ranks on 2 cores, 8 B: about 2.5 us per allreduce with
// these values, 12-20 us when sleeping at once). With more ranks than cores
// the ranks that can move need the cores: yield briefly, then sleep (4 ranks
// on 2 cores: sleeping at once doubled small-message latency; 20-200 us of
// yielding measured alike).
constexpr auto kYieldSpare = std::chrono::microseconds(200);
constexpr auto kYieldOversubscribed = std::chrono::microseconds(50);
// Oversubscribed and waiting on a socket: a rank asleep in poll() is woken by
// the sender's loopback softirq, and in a VM waking a halted vCPU cost
// hundreds of microseconds to milliseconds (4 socket ranks on 2 cores, ring
// AllGather / ReduceScatter of 32 B-16 KiB: 400-3000 us a call with 50 or
// 200 us of yielding, 110-170 us with 500 or 1000 us; AllReduce and
// Broadcast alike or better). Shared memory keeps 50 us: its futex sleep
// measured best there (4-rank AllGather of 32 B: 12 us, 17 us with 500).
constexpr auto kYieldOversubscribedSockets = std::chrono::microseconds(1000);

// A stall this long (a peer's step takes microseconds) is worth a look at the
// connections the call does not use.
constexpr auto kForeignStepsAfter = std::chrono::milliseconds(20);

using Lanes = std::vector<std::unique_ptr<Lane>>;

// Whether the call must wait for this connection's posted steps to be
// consumed before returning. A shared-memory step already sits in the
// peer's mapping (the user's buffer is no longer read, and no helper has
// bytes left to move), so only other transports need it.
bool mustDrain(const Connection& c) { return !c.sharedCounters && !sendsDrained(c); }

// Every this many passes the waiter also drives the connections its lanes do
// not use (a peer's abort notice may arrive on any of them); it always does
// before it sleeps.
constexpr int kFullSweepEvery = 64;

// A failure a transport reported: a peer's abort notice, or a connection
// that closed or broke. It is held, not raised at once, because the data this
// call needs may have arrived already: a peer that finished its part and then
// failed sends its notice after its last step, and on another channel (or
// through the socket helpers) that step can come after the notice. The lanes
// go on consuming what arrived; the failure is raised once they have not moved
// for kHoldFor, when a lane waits on a closed peer, or at the timeout. A call
// that completes anyway succeeds and leaves the communicator failed, so the
// next call fails at entry naming the culprit.
constexpr auto kHoldFor = std::chrono::milliseconds(200);

class HeldFailure {
 public:
  bool held() const { return code_ != ncclSuccess; }

  // The first failure wins; its text is the thread's last error now.
  void hold(HostComm* comm, ncclResult_t code, int culprit, int reporter = -1) {
    if (held()) return;
    code_ = code;
    comm_ = comm;
    culprit_ = culprit;
    reporter_ = reporter;
    text_ = lastErrorText();
    lastMove_ = std::chrono::steady_clock::now();
  }

  void lanesMoved() {
    if (held()) lastMove_ = std::chrono::steady_clock::now();
  }

  // While the finished lanes' sends drain: the steps the peers have consumed
  // so far. A rise counts as movement (a healthy peer still takes this
  // call's data); the first report only sets the baseline.
  void sendsConsumed(uint64_t consumed) {
    if (sawConsumed_ && consumed != consumed_) lanesMoved();
    consumed_ = consumed;
    sawConsumed_ = true;
  }

  bool stale() const { return held() && std::chrono::steady_clock::now() - lastMove_ > kHoldFor; }

  // Fails the communicator (telling its peers) and returns the held failure
  // with its text, led by the call it broke: a transport's message names the
  // peer and the connection, not the collective.
  ncclResult_t raise(const LaneSpec& call, const std::string& also = "") {
    std::string text = std::string(collName(call.coll)) + " #" + std::to_string(call.opCount) + ": " + text_;
    if (text_.rfind(collName(call.coll), 0) == 0) text = text_;
    text += also;
    ncclResult_t r = recordFailure(code_, text.c_str());
    comm_->markFailed(r, culprit_);
    return r;
  }

  // The call completed in spite of the failure: the communicator fails from
  // the next call on.
  void completedAnyway(const LaneSpec& call) {
    if (!held()) return;
    raise(call);
    clearThreadError();
  }

  const HostComm* comm() const { return comm_; }
  int culprit() const { return culprit_; }
  int reporter() const { return reporter_; }  // the peer whose connection told of it, or -1

  void reset() {
    code_ = ncclSuccess;
    comm_ = nullptr;
    culprit_ = -1;
    reporter_ = -1;
    text_.clear();
    sawConsumed_ = false;
  }

 private:
  ncclResult_t code_ = ncclSuccess;
  HostComm* comm_ = nullptr;
  int culprit_ = -1;
  int reporter_ = -1;
  std::string text_;
  std::chrono::steady_clock::time_point lastMove_;
  bool sawConsumed_ = false;
  uint64_t consumed_ = 0;
};

// Which of the lane's send and receive connections its steps use, by the
// steps' connection indices (uint8_t, so 256 bits hold any of them).
using ConnectionSet = std::bitset<256>;
void markUsedConnections(const LaneSpec& s, ConnectionSet* send, ConnectionSet* recv) {
  for (size_t k = 0; k < s.nsteps; ++k) {
    const Step& st = s.steps[k];
    if (stepSends(st.kind)) send->set(st.sendConn);
    if (!stepReceives(st.kind)) continue;
    if (st.flags & kStepAllPeers) recv->set();  // a slot from every connection
    else recv->set(st.recvConn);
  }
}

struct Waiter {
  std::vector<HostComm*> comms;
  // The connections the lanes use that need progress() (sockets), with
  // their communicator: a pass drives only these, since a receive on every
  // idle connection (other channels, trees) costs a system call each.
  std::vector<std::pair<Connection*, HostComm*>> active;
  // The lanes' shared-memory connections: only lanes move a connection's
  // counter, so only these can have a peer to wake. Waking through every
  // connection of the communicator (rings, trees, mesh, a virtual call each)
  // was 17% of a 2-rank 8-byte Broadcast's profile, paid on every spin pass.
  std::vector<Connection*> shared;
  int passes = 0;
  std::vector<pollfd> fds;
  std::vector<Connection*> blocked;
  int spinsBeforeBlocking = 0;
  double timeoutSeconds = 0;
  std::chrono::steady_clock::time_point idleSince;
  HeldFailure held;

  // Vectors are cleared, not rebuilt: one Waiter per thread serves every
  // call, and lanes of the id it last derived them from keep them.
  uint64_t lanesId = 0;
  void init(const Lanes& lanes, uint64_t id) {
    passes = 0;
    held.reset();
    if (id == 0 || id != lanesId) deriveConnections(lanes);
    lanesId = id;
    // Read every call: gyreCommSetTimeout may change a timeout between calls.
    spinsBeforeBlocking = comms.empty() ? 0 : comms[0]->spinsBeforeBlocking;
    timeoutSeconds = comms.empty() ? 1 : comms[0]->timeoutSeconds;
    for (HostComm* c : comms) {
      spinsBeforeBlocking = std::min(spinsBeforeBlocking, c->spinsBeforeBlocking);
      timeoutSeconds = std::min(timeoutSeconds, c->timeoutSeconds);
    }
  }

  void deriveConnections(const Lanes& lanes) {
    comms.clear();
    for (const auto& l : lanes)
      if (std::find(comms.begin(), comms.end(), l->comm()) == comms.end()) comms.push_back(l->comm());
    active.clear();
    shared.clear();
    for (const auto& l : lanes) {
      const LaneSpec& s = l->spec();
      // Only connections the lane's steps use: a ring lane is given both of
      // its channel's, and a Broadcast root never receives (a recv() per
      // pass on that idle socket was one system call per 2-rank call, ~1 µs
      // of ~7 over TCP). Idle ones are still swept (progressEverything).
      ConnectionSet usedSend, usedRecv;
      markUsedConnections(s, &usedSend, &usedRecv);
      for (auto [list, n, used] : {std::tuple{s.send, s.nsend, &usedSend}, std::tuple{s.recv, s.nrecv, &usedRecv}})
        for (size_t i = 0; i < n; ++i) {
          if (i < used->size() && !used->test(i)) continue;  // past 256: a mesh's, counted as used
          Connection* c = list[i];
          if (c->needsProgress &&
              std::find_if(active.begin(), active.end(), [&](const auto& a) { return a.first == c; }) == active.end())
            active.push_back({c, l->comm()});
          if (c->sharedCounters && std::find(shared.begin(), shared.end(), c) == shared.end()) shared.push_back(c);
        }
    }
  }

  // Moves bytes on the lanes' connections (every kFullSweepEvery passes on
  // all of them) and wakes shared-memory peers sleeping on counters the
  // lanes have moved. A transport's failure is held, not returned.
  void progress() {
    if (++passes % kFullSweepEvery == 0) return progressEverything();
    QuietFailures quiet(held.held());
    for (auto [conn, comm] : active) {
      int culprit = -1;
      ncclResult_t r = conn->transport->progress(*conn, &culprit);
      if (r != ncclSuccess) held.hold(comm, r, culprit, conn->peer);
    }
    wakePeers();
  }

  void progressEverything() {
    QuietFailures quiet(held.held());
    for (HostComm* c : comms) {
      int culprit = -1;
      int reporter = -1;
      ncclResult_t r = c->progress.progressAll(&culprit, &reporter);
      if (r != ncclSuccess) held.hold(c, r, culprit, reporter);
    }
  }

  void wakePeers() {
    for (Connection* c : shared) c->transport->wakePeer(*c);
  }

  ncclResult_t checkAborted(const char* what) {
    for (HostComm* c : comms)
      if (c->abortFlag->load(std::memory_order_relaxed))
        return fail(ncclInvalidUsage, "%s: the communicator of rank %d was aborted (ncclCommAbort)", what, c->rank);
    return ncclSuccess;
  }

  // Called when no lane could move, `round` times in a row before this call.
  // Spinning is the caller's loop; here a rank yields, then blocks: in futex
  // when it waits only on shared memory, else in poll() on the sockets.
  // `draining`: the lanes are done and only their sends' consumption is
  // awaited.
  void sleep(const Lanes& lanes, const Deadline& deadline, bool draining, int round) {
    if (round == 0) idleSince = std::chrono::steady_clock::now();
    collectBlocked(lanes, draining);
    if (blocked.empty()) {  // a peer moved since the lanes looked: go round again
      sched_yield();
      return;
    }
    size_t shared = countShared();
    const auto yieldFor = spinsBeforeBlocking > 0         ? kYieldSpare
                          : shared == blocked.size()      ? kYieldOversubscribed
                                                          : kYieldOversubscribedSockets;
    if (std::chrono::steady_clock::now() - idleSince < yieldFor) {
      sched_yield();
      return;
    }
    // About to block: what arrived on the communicator's other connections
    // (abort notices) first. While yielding, progress() sweeps them every
    // kFullSweepEvery passes; a sweep on every round cost an oversubscribed
    // socket rank a recv() on every idle socket of the communicator per pass
    // (4 ranks, 8-byte AllReduce: ~23 system calls a call, most of them failed recvs).
    progressEverything();
    collectBlocked(lanes, draining);
    if (blocked.empty()) {
      sched_yield();
      return;
    }
    shared = countShared();
    const bool onlyShared = shared > 0 && shared == blocked.size();
    {
      QuietFailures quiet(held.held());
      for (HostComm* c : comms) {
        int culprit = -1;
        int reporter = -1;
        ncclResult_t r = c->progress.checkQuietPeers(&culprit, &reporter);
        if (r != ncclSuccess) held.hold(c, r, culprit, reporter);
      }
    }
    int ms = deadline.remainingMs(kPollSliceMs);
    if (onlyShared) {
      ProgressEngine::sleepOnShared(blocked, draining, ms);
      return;
    }
    fds.clear();
    for (HostComm* c : comms) c->progress.appendPollFds(&fds);
    if (shared > 0) ms = std::min(ms, 1);  // poll() does not see shared-memory steps
    if (fds.empty()) std::this_thread::yield();
    else poll(fds.data(), fds.size(), ms);
  }

 private:
  size_t countShared() const {
    size_t n = 0;
    for (const Connection* c : blocked) n += c->sharedCounters ? 1 : 0;
    return n;
  }

  // The connections the lanes wait on (Lane::blockingConnection), or while
  // draining the sends not yet consumed.
  void collectBlocked(const Lanes& lanes, bool draining) {
    blocked.clear();
    auto add = [&](Connection* c) {
      if (c && std::find(blocked.begin(), blocked.end(), c) == blocked.end()) blocked.push_back(c);
    };
    for (const auto& l : lanes) {
      if (!draining) {
        add(l->blockingConnection());
        continue;
      }
      for (size_t i = 0; i < l->spec().nsend; ++i)
        if (mustDrain(*l->spec().send[i])) add(l->spec().send[i]);
    }
  }
};

// Where a lane stands: "step 3 of 24", or, once every step ran and only
// its sends are still leaving, "after step 24 of 24".
std::string laneProgress(const Lane& lane) {
  const size_t next = lane.nextStep(), n = lane.spec().nsteps;
  return next < n ? "step " + std::to_string(next + 1) + " of " + std::to_string(n)
                  : "after step " + std::to_string(n) + " of " + std::to_string(n);
}

ncclResult_t describeStall(const Lane& lane, const Connection* conn, double seconds, bool peerClosed) {
  const LaneSpec& s = lane.spec();
  const std::string where = laneProgress(lane);
  const PeerInfo& p = (*lane.comm()->peers)[conn->peer];
  ncclResult_t r;
  if (peerClosed && !conn->closedHow.empty())
    r = fail(ncclRemoteError,
             "%s #%llu (channel %d, %s): the link from rank %d (%s pid %d) failed before the data this "
             "rank needs arrived: %s",
             collName(s.coll), static_cast<unsigned long long>(s.opCount), s.channel, where.c_str(),
             conn->peer, p.host, p.pid, conn->closedHow.c_str());
  else if (peerClosed)
    r = fail(ncclRemoteError,
             "%s #%llu (channel %d, %s): rank %d (%s pid %d) closed its connection before sending the "
             "data this rank needs; it died, aborted or left the collective",
             collName(s.coll), static_cast<unsigned long long>(s.opCount), s.channel, where.c_str(),
             conn->peer, p.host, p.pid);
  else
    r = fail(ncclRemoteError,
             "%s #%llu (channel %d, %s): rank %d waited %.0f s (GYRE_TIMEOUT) for %s rank %d (%s pid "
             "%d); it is stalled, dead, or not making the matching call",
             collName(s.coll), static_cast<unsigned long long>(s.opCount), s.channel, where.c_str(),
             lane.comm()->rank, seconds, conn->isSend ? "buffer space at" : "data from", conn->peer, p.host, p.pid);
  lane.comm()->markFailed(r, conn->peer);
  return r;
}

// The first lane waiting for data from a peer that closed its connection (it
// can never finish), or null.
const Lane* laneOnClosedPeer(const Lanes& lanes) {
  for (const auto& l : lanes) {
    const Connection* c = l->blockingConnection();
    if (c && !c->isSend && peerClosedOf(*c)) return l.get();
  }
  return nullptr;
}

// A peer's notice that blames this rank (it gave up waiting on it) may reach
// a rank that is itself blocked on a third rank in the same call: a stall
// upstream, as when a stopped rank holds up a whole ring. The error then also
// says whom this rank is waiting for, so the stalled rank is named somewhere.
std::string blockedOnAnother(const HeldFailure& held, const Lanes& lanes) {
  const HostComm* comm = held.comm();
  if (!comm || held.culprit() != comm->rank) return "";
  for (const auto& l : lanes) {
    if (l->comm() != comm) continue;  // a lane of another communicator driven by this thread
    const Connection* c = l->blockingConnection();
    // Waiting on the reporter itself says nothing new (a mismatch it found).
    if (!c || c->isSend || c->peer == comm->rank || c->peer == held.reporter()) continue;
    const PeerInfo& p = (*comm->peers)[c->peer];
    return "; this rank is itself still waiting for data from rank " + std::to_string(c->peer) + " (" + p.host +
           " pid " + std::to_string(p.pid) + ")";
  }
  return "";
}

// The first send connection (and its lane) whose posted steps have not all
// left this rank, or null when every send is drained.
Connection* undrainedSend(const std::vector<std::unique_ptr<Lane>>& lanes, const Lane** owner) {
  for (const auto& l : lanes)
    for (size_t i = 0; i < l->spec().nsend; ++i)
      if (mustDrain(*l->spec().send[i])) {
        *owner = l.get();
        return l->spec().send[i];
      }
  return nullptr;
}

// How many steps of the lanes' drained sends (not shared memory) the peers
// have consumed so far.
uint64_t consumedSends(const Lanes& lanes) {
  uint64_t sum = 0;
  for (const auto& l : lanes)
    for (size_t i = 0; i < l->spec().nsend; ++i)
      if (!l->spec().send[i]->sharedCounters) sum += loadAcquire(l->spec().send[i]->fifo.head);
  return sum;
}

ncclResult_t noProgressAtAll(const Lanes& lanes, double seconds) {
  // Every wait ends at GYRE_TIMEOUT, even one no lane can attribute to a peer.
  const LaneSpec& s = lanes[0]->spec();
  ncclResult_t r = fail(ncclInternalError, "%s #%llu: no progress for %.0f s (GYRE_TIMEOUT) and no peer to blame",
                        collName(s.coll), static_cast<unsigned long long>(s.opCount), seconds);
  lanes[0]->comm()->markFailed(r, -1);
  return r;
}

}  // namespace

ncclResult_t runLanes(Lanes& lanes, uint64_t lanesId) {
  static __thread Waiter* waiterSlot = nullptr;
  Waiter& waiter = threadOwned(waiterSlot);
  waiter.init(lanes, lanesId);
  HeldFailure& held = waiter.held;
  LaneTraces traces(lanes);  // the steps' profiler events, when a plugin asks for them
  // The deadline runs from the last pass that moved a lane but is read from
  // the clock only when a wait gets past spinning: a call that never stalls
  // (a small shared-memory call whose peer is ready) reads no clock at all
  // (two clock_gettime calls were a tenth of a 1-rank 8-byte AllReduce).
  // Spinning is bounded (spinsBeforeBlocking passes), so a timeout comes
  // that much later at most.
  std::optional<Deadline> armed;
  auto deadline = [&]() -> const Deadline& {
    if (!armed) armed = Deadline::afterSeconds(waiter.timeoutSeconds);
    return *armed;
  };
  // The lanes' first steps go before the first transport pass: a call's
  // sends are then on their way one system call sooner.
  bool startedAny = false;
  for (auto& lane : lanes) GYRE_CHECK(lane->advance(&startedAny));
  for (int idle = 0;;) {
    // Transports first, lanes second: whatever progress() just received is
    // consumed before deciding to sleep, because poll() would not report data
    // that has already left the socket.
    waiter.progress();
    bool progressed = false, allDone = true;
    for (auto& lane : lanes) {
      GYRE_CHECK(lane->advance(&progressed));
      allDone &= lane->done();
    }
    if (allDone) break;
    if (progressed) {
      idle = 0;
      held.lanesMoved();
      armed.reset();
      continue;
    }
    // A held failure names the original culprit: it is the better report
    // when a lane waits on a closed peer or the time is up.
    if (held.stale()) return held.raise(lanes[0]->spec(), blockedOnAnother(held, lanes));
    if (const Lane* l = laneOnClosedPeer(lanes))
      return held.held() ? held.raise(lanes[0]->spec(), blockedOnAnother(held, lanes)) : describeStall(*l, l->blockingConnection(), 0, true);
    GYRE_CHECK(waiter.checkAborted(collName(lanes[0]->spec().coll)));
    if (++idle <= waiter.spinsBeforeBlocking) continue;
    if (deadline().expired()) {
      if (held.held()) return held.raise(lanes[0]->spec(), blockedOnAnother(held, lanes));
      for (const auto& l : lanes)
        if (const Connection* c = l->blockingConnection()) return describeStall(*l, c, waiter.timeoutSeconds, false);
      return noProgressAtAll(lanes, waiter.timeoutSeconds);
    }
    const int round = idle - waiter.spinsBeforeBlocking - 1;
    // Only a wait that has lasted looks for a peer's step where this call
    // does not read (foreign_steps.h), or for acknowledgements of steps
    // never sent (peer_credits.h): nothing on the fast path.
    if (round > 0 && !held.held() && std::chrono::steady_clock::now() - waiter.idleSince > kForeignStepsAfter) {
      GYRE_CHECK(checkForeignSteps(lanes));
      GYRE_CHECK(checkPeerCredits(lanes));
    }
    waiter.sleep(lanes, deadline(), false, round);
  }
  // The lanes' last steps have not been announced to sleeping peers yet.
  waiter.wakePeers();
  // The call returns only when its data has left this rank's buffers.
  for (int round = 0;; ++round) {
    const Lane* owner = nullptr;
    if (!undrainedSend(lanes, &owner)) break;
    waiter.progress();
    Connection* pending = undrainedSend(lanes, &owner);
    if (!pending) break;
    GYRE_CHECK(waiter.checkAborted(collName(lanes[0]->spec().coll)));
    if (held.held()) held.sendsConsumed(consumedSends(lanes));
    if (held.stale()) return held.raise(lanes[0]->spec(), blockedOnAnother(held, lanes));
    if (deadline().expired()) return held.held() ? held.raise(lanes[0]->spec(), blockedOnAnother(held, lanes)) : describeStall(*owner, pending, waiter.timeoutSeconds, false);
    waiter.sleep(lanes, deadline(), true, round);
  }
  held.completedAnyway(lanes[0]->spec());
  return ncclSuccess;
}

}  // namespace gyre
