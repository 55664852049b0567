#include "src/device/copy/ipc_copies.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <string>

#include <sys/mman.h>

#include "src/bootstrap/bootstrap.h"
#include "src/call/datatypes.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/flag_ops.h"
#include "src/device/launch_events.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/ipc_registry.h"
#include "src/device/process_liveness.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

constexpr int kSendReady = 0;
constexpr int kCopyDone = 1;

// Where a captured exchange's flag lives in an inbox: `kind` is kSendReady
// or kCopyDone, `peer` the other rank of the pair, `slot` the exchange's.
size_t capturedFlag(int nranks, int kind, int peer, uint32_t slot) {
  return 2 * size_t(nranks) + (size_t(kind) * nranks + peer) * kCapturedPairSlots + slot;
}
size_t inboxWords(int nranks) { return capturedFlag(nranks, 2, 0, 0); }
constexpr auto kWatchInterval = std::chrono::milliseconds(100);
constexpr uint32_t kReleaseAhead = 1u << 30;  // past every value a pending wait can want

bool before(uint32_t value, uint32_t wanted) { return static_cast<int32_t>(value - wanted) < 0; }

// Satisfies every wait this rank's streams have or will have on its inbox:
// host stores to the mapped words, which reach the waiting streams whatever
// their hardware queue holds.
void releaseWaits(DeviceComm* comm) {
  IpcCopyState& s = *comm->copies->ipc;
  if (s.released.exchange(true) || !s.inboxHost) return;
  const int n = comm->nranks;
  // Captured waits want 1 (and clear it after): every one is satisfied.
  std::vector<uint32_t> values(inboxWords(n), 1);
  {
    std::lock_guard<std::mutex> lock(s.waitsMutex);
    for (int p = 0; p < n; ++p) {
      values[kSendReady * n + p] = s.awaitedReady[p] + kReleaseAhead;
      values[kCopyDone * n + p] = s.awaitedDone[p] + kReleaseAhead;
    }
  }
  for (size_t i = 0; i < values.size(); ++i) __atomic_store_n(&s.inboxHost[i], values[i], __ATOMIC_RELEASE);
}

void failAndRelease(DeviceComm* comm, ncclResult_t r, int culprit) {
  GYRE_WARN("%s", lastErrorText());
  comm->host->markFailed(r, culprit);
  releaseWaits(comm);
}

// When the inbox's flags last changed.
struct StallClock {
  std::vector<uint32_t> seen;
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
};

// One look at this rank's inbox: a peer process that is gone, or waits that
// have not moved for GYRE_TIMEOUT, fail the communicator and release them.
void watchOnce(DeviceComm* comm, StallClock* clock) {
  IpcCopyState& s = *comm->copies->ipc;
  const int n = comm->nranks;
  std::vector<uint32_t> ready, done;
  {
    std::lock_guard<std::mutex> lock(s.waitsMutex);
    ready = s.awaitedReady;
    done = s.awaitedDone;
  }
  std::vector<uint32_t> flags(2 * size_t(n));
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = __atomic_load_n(&s.inboxHost[i], __ATOMIC_ACQUIRE);
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  int stalled = -1;
  bool stalledOnSend = false;
  for (int p = 0; p < n; ++p) {
    if (!s.peers[p]) continue;
    // A graph may be waiting on any peer it was captured with; it cannot
    // be seen from here whether it runs, so only a death is noticed.
    if (s.capturedWith[p] && processGone(peers[p].pid)) {
      failAndRelease(comm, fail(ncclRemoteError, "rank %d (%s pid %d), with which rank %d's CUDA graphs exchange "
                                "device buffers by CUDA IPC, died; the graphs' waits on it are released", p,
                                peers[p].host, peers[p].pid, comm->rank), p);
      return;
    }
    bool waitsReady = before(flags[kSendReady * n + p], ready[p]);
    bool waitsDone = before(flags[kCopyDone * n + p], done[p]);
    if (!waitsReady && !waitsDone) continue;
    if (processGone(peers[p].pid)) {
      failAndRelease(comm, fail(ncclRemoteError, "rank %d (%s pid %d), which exchanges device buffers with rank %d "
                                "by CUDA IPC, died; the sends and receives of rank %d that wait on it stop", p,
                                peers[p].host, peers[p].pid, comm->rank, comm->rank), p);
      return;
    }
    if (stalled < 0) {
      stalled = p;
      stalledOnSend = waitsDone;
    }
  }
  auto now = std::chrono::steady_clock::now();
  if (stalled < 0 || flags != clock->seen) {
    clock->seen = flags;
    clock->since = now;
    return;
  }
  if (std::chrono::duration<double>(now - clock->since).count() < comm->collTimeoutSeconds) return;
  failAndRelease(comm, fail(ncclRemoteError, "rank %d: %s rank %d has not moved for %.0f s (GYRE_TIMEOUT): its "
                            "stream is stalled or it stopped", comm->rank,
                            stalledOnSend ? "an ncclSend whose data" : "an ncclRecv from", stalled,
                            comm->collTimeoutSeconds), stalled);
}

void watch(DeviceComm* comm) {
  IpcCopyState& s = *comm->copies->ipc;
  ScopedLogRank logRank(comm->rank);
  enterDeviceOfThisThread(comm->cudaDev);
  relaxCaptureModeOfThisThread();
  StallClock clock;
  std::unique_lock<std::mutex> lock(s.watchMutex);
  while (!s.wake.wait_for(lock, kWatchInterval, [&] { return s.stopping; })) {
    if (s.released.load()) continue;
    if (comm->abortFlag.load()) {
      releaseWaits(comm);
      continue;
    }
    watchOnce(comm, &clock);
  }
}

// Whether this process can copy to and from `peer`'s GPU.
bool reaches(const DeviceComm* comm, const PeerInfo& peer) {
  DeviceRuntime* rt = deviceRuntime();
  int device = -1;
  if (!rt->deviceAtBusId(peer.busId, &device)) return false;
  return device == comm->cudaDev ||
         (rt->canAccessPeer(comm->cudaDev, device) && rt->canAccessPeer(device, comm->cudaDev));
}

// Registers the mailbox's inboxes for this rank's device: *devBase is
// where the device sees their first word.
ncclResult_t registerInboxes(IpcCopyState* s, uint32_t** devBase) {
  size_t bytes = 0;
  uint32_t* host = s->mailbox.inboxes(&bytes);
  if (!host) return fail(ncclInternalError, "device send/recv between processes: the host's mailbox has no inboxes");
  void* device = nullptr;
  GYRE_CHECK(deviceRuntime()->registerHost(host, bytes, &device));
  s->registered = host;
  *devBase = static_cast<uint32_t*>(device);
  return ncclSuccess;
}

}  // namespace

ncclResult_t setupIpcCopies(DeviceComm* comm, const Deadline& deadline) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const int n = comm->nranks, me = comm->rank;
  // Every rank sees the same table, so all take part in the meetings or none.
  std::map<uint64_t, std::vector<int32_t>> pidsOnHost;
  for (const PeerInfo& p : peers) {
    auto& pids = pidsOnHost[p.hostHash];
    if (std::find(pids.begin(), pids.end(), p.pid) == pids.end()) pids.push_back(p.pid);
  }
  if (std::none_of(pidsOnHost.begin(), pidsOnHost.end(), [](const auto& h) { return h.second.size() > 1; }))
    return ncclSuccess;
  comm->copies->ipc = std::make_unique<IpcCopyState>();
  IpcCopyState& s = *comm->copies->ipc;
  std::vector<bool> onHost(n, false), reach(n, false);
  const bool forcedStaged = env::getString("GYRE_DEVICE_PATH") == "staged";
  for (int r = 0; r < n; ++r) {
    onHost[r] = peers[r].hostHash == peers[me].hostHash;
    reach[r] = onHost[r] && peers[r].pid != peers[me].pid && !forcedStaged && reaches(comm, peers[r]);
  }
  GYRE_CHECK(s.mailbox.setup(comm->bootstrap, onHost, inboxWords(n) + directInboxWords(n), deadline,
                             &comm->abortFlag));
  // The inboxes, registered where this rank has a peer to copy with; then
  // one byte per rank: reached and registered.
  bool wanted = std::find(reach.begin(), reach.end(), true) != reach.end();
  uint32_t* devInboxes = nullptr;
  ncclResult_t registered = wanted ? registerInboxes(&s, &devInboxes) : ncclSuccess;
  if (registered != ncclSuccess)
    GYRE_WARN("rank %d: cannot register the host's send/recv inboxes for its GPU, so its send/recv with other "
              "processes stage: %s", me, lastErrorText());
  std::vector<char> hellos(size_t(n) * n, 0);
  for (int r = 0; r < n; ++r) hellos[size_t(me) * n + r] = reach[r] && registered == ncclSuccess ? 1 : 0;
  GYRE_CHECK(comm->bootstrap->allGather(hellos.data(), n, deadline, &comm->abortFlag));
  auto reached = [&](int from, int to) { return hellos[size_t(from) * n + to] != 0; };
  s.peers.assign(n, false);
  bool any = false;
  for (int r = 0; r < n; ++r) {
    s.peers[r] = r != me && reached(me, r) && reached(r, me);
    any |= s.peers[r];
  }
  s.peerInbox.assign(n, nullptr);
  s.devInboxes = devInboxes;
  if (any) {
    // A word's place in the segment is the same for the host and the device.
    uint32_t* hostInboxes = static_cast<uint32_t*>(s.registered);
    s.inboxHost = s.mailbox.inboxOf(me);
    s.inbox = devInboxes + (s.inboxHost - hostInboxes);
    for (int r = 0; r < n; ++r)
      if (s.peers[r]) s.peerInbox[r] = devInboxes + (s.mailbox.inboxOf(r) - hostInboxes);
  }
  GYRE_CHECK(s.mappings.setup());
  s.sendSeq.assign(n, 0);
  s.recvSeq.assign(n, 0);
  s.awaitedReady.assign(n, 0);
  s.awaitedDone.assign(n, 0);
  s.capturedSends.assign(n, 0);
  s.capturedWith = std::make_unique<std::atomic<bool>[]>(n);
  if (any) {
    s.watchdog = std::thread([comm] { watch(comm); });
    GYRE_INFO("INIT", "device send/recv with ranks of other processes on this host copy by CUDA IPC");
  }
  return ncclSuccess;
}

bool copiesByIpc(const DeviceComm* comm, int peer) {
  const CopyState* c = comm->copies.get();
  return c && c->ipc && c->ipc->peers[peer];
}

namespace {

struct IpcSend {
  const DeviceRequest* call;
  uint64_t seq;
  const void* buffer;       // the user's, or the scratch copy of it
  void* scratch = nullptr;  // taken from the pool (copy_calls.h), or owned by a graph
  size_t scratchCapacity = 0;
  uint32_t capturedSlot = 0;  // SendNote::capturedSlot
};

struct IpcRecv {
  const DeviceRequest* call;
  uint64_t seq;
  const void* source = nullptr;  // the sender's buffer as mapped here
  uint64_t mapping = 0;          // its entry in the mapping cache (0: a window's)
  bool sizesMatch = true;
  uint32_t capturedSlot = 0;  // SendNote::capturedSlot
};

ncclResult_t failCall(const DeviceRequest& c, ncclResult_t code, const std::string& why) {
  return failP2PCall(c, code, "another process, CUDA IPC copy", why);
}

// Phase 1: a note per send; never waits for a peer's call.
ncclResult_t postSends(const std::vector<const DeviceRequest*>& calls, std::vector<IpcSend>* sends,
                       std::vector<DeviceRequest>* staged) {
  for (const DeviceRequest* c : calls) {
    if (!c->isSend) continue;
    OnDevice onDevice;  // its scratch on the communicator's GPU
    GYRE_CHECK(onDevice.enter(c->comm->cudaDev, c->comm->rank));
    IpcCopyState& s = *c->comm->copies->ipc;
    IpcSend send{c, s.sendSeq[c->root]++, c->input};
    SendNote note;
    note.bytes = p2pBytes(*c);
    bool capturing = false;
    GYRE_CHECK(deviceRuntime()->isCapturing(c->stream, &capturing));
    bool slotFree = true;
    if (capturing) {
      slotFree = s.capturedSends[c->root] < kCapturedPairSlots;
      if (slotFree) note.capturedSlot = send.capturedSlot = ++s.capturedSends[c->root];
      else GYRE_INFO("P2P", "rank %d: %d captured sends to rank %d already hold every capture slot; this one "
                     "would stage, which a capture refuses", c->comm->rank, kCapturedPairSlots, c->root);
    }
    if (slotFree && sendOverwrittenInBatch(*c, calls)) {
      if (capturing) {
        // Every replay copies into it again: the graph owns it until destroy.
        RelaxedCapture relaxed;  // allocated while the application captures
        GYRE_CHECK(deviceRuntime()->deviceAlloc(note.bytes, &send.scratch));
        s.capturedScratch.push_back(send.scratch);
      } else {
        GYRE_CHECK(takeCopyScratch(c->comm, note.bytes, &send.scratch, &send.scratchCapacity));
      }
      send.buffer = send.scratch;
    }
    // A registered window needs no handle: the receiver mapped it at registration.
    uint64_t serial = 0;
    size_t inWindow = 0;
    if (slotFree && !send.scratch && c->comm->windows.locate(send.buffer, note.bytes, &serial, &inWindow)) {
      note.window = serial + 1;
      note.offset = inWindow;
      note.usable = 1;
    } else {
      note.usable = slotFree && describeOwnAllocation(send.buffer, note.bytes, &note.allocation, &note.offset);
    }
    Deadline deadline = Deadline::afterSeconds(c->comm->collTimeoutSeconds);
    if (!s.mailbox.post(c->comm->rank, c->root, send.seq, note, deadline, &c->comm->abortFlag))
      return failCall(*c, ncclRemoteError, "rank " + std::to_string(c->root) + " has not taken the previous " +
                      "sends' notes within GYRE_TIMEOUT");
    if (!note.usable) {
      if (send.scratch && !capturing) returnCopyScratch(c->comm, send.scratch, send.scratchCapacity, nullptr);
      staged->push_back(*c);
      countP2PPath(*c, P2PPath::Staged);
      continue;
    }
    // Its P2p event from here: the call takes this path (capture aside).
    if (!capturing && observedDeviceCalls(c->comm)) startDeviceCallEvent(*c, 0, 1, "", "");
    sends->push_back(send);
  }
  return ncclSuccess;
}

// Phase 2: each receive takes its sender's note.
ncclResult_t takeNotes(const std::vector<const DeviceRequest*>& calls, std::vector<IpcRecv>* recvs,
                       std::vector<DeviceRequest>* staged) {
  for (const DeviceRequest* c : calls) {
    if (c->isSend) continue;
    DeviceComm* comm = c->comm;
    OnDevice onDevice;  // its mappings of the sender's memory made on the communicator's GPU
    GYRE_CHECK(onDevice.enter(comm->cudaDev, comm->rank));
    IpcCopyState& s = *comm->copies->ipc;
    IpcRecv recv{c, s.recvSeq[c->root]++};
    const PeerInfo& peer = comm->bootstrap->peers()[c->root];
    Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
    SendNote note;
    if (!s.mailbox.take(c->root, comm->rank, recv.seq, &note, deadline, &comm->abortFlag,
                        [&] { return processGone(peer.pid); })) {
      std::string why = comm->abortFlag.load() ? std::string("the communicator was aborted")
                        : processGone(peer.pid)
                            ? "rank " + std::to_string(c->root) + " (pid " + std::to_string(peer.pid) + ") died"
                            : "rank " + std::to_string(c->root) + " (pid " + std::to_string(peer.pid) +
                                  ") made no matching ncclSend within GYRE_TIMEOUT (" +
                                  std::to_string(static_cast<int>(comm->collTimeoutSeconds)) + " s)";
      return failCall(*c, comm->abortFlag.load() ? ncclInvalidUsage : ncclRemoteError, why);
    }
    if (!note.usable) {
      staged->push_back(*c);
      countP2PPath(*c, P2PPath::Staged);
      continue;
    }
    bool capturing = false;
    GYRE_CHECK(deviceRuntime()->isCapturing(c->stream, &capturing));
    if (capturing != (note.capturedSlot != 0))
      return failCall(*c, ncclInvalidUsage, std::string(capturing ? "this receive is" : "this receive is not") +
                      " captured into a CUDA graph but rank " + std::to_string(c->root) + "'s send " +
                      (capturing ? "is not" : "is") + "; both sides of a pair must capture alike");
    recv.capturedSlot = note.capturedSlot;
    if (capturing) s.capturedWith[c->root] = true;
    else if (observedDeviceCalls(comm)) startDeviceCallEvent(*c, 0, 1, "", "");
    recv.sizesMatch = note.bytes == p2pBytes(*c);
    if (recv.sizesMatch && note.window) {
      void* source = nullptr;
      if (!comm->windows.peerAddressAt(note.window - 1, note.offset, note.bytes, c->root, &source)) {
        recv.sizesMatch = false;  // the sender's stream still gets its done
        failCall(*c, ncclInvalidUsage, "rank " + std::to_string(c->root) + "'s ncclSend is from its registered "
                 "window #" + std::to_string(note.window - 1) + ", which this rank has not mapped (deregistered "
                 "here, or registered by the ranks in a different order)");
      } else {
        recv.source = source;
        s.windowed.fetch_add(1, std::memory_order_relaxed);
      }
    } else if (recv.sizesMatch) {
      void* base = nullptr;
      GYRE_CHECK(s.mappings.map(peer.pid, note.allocation, &base, &recv.mapping));
      recv.source = static_cast<char*>(base) + note.offset;
    } else {
      failCall(*c, ncclInvalidUsage, "mismatched sizes: rank " + std::to_string(c->root) + "'s ncclSend has " +
               std::to_string(note.bytes) + " bytes");
    }
    recvs->push_back(recv);
  }
  return ncclSuccess;
}

// Phase 3: one communicator's stream work, on its first call's stream.
ncclResult_t enqueueStreamWork(DeviceComm* comm, const std::vector<IpcSend>& sends,
                               const std::vector<IpcRecv>& recvs) {
  DeviceRuntime* rt = deviceRuntime();
  IpcCopyState& s = *comm->copies->ipc;
  const int n = comm->nranks, me = comm->rank;
  std::vector<StreamHandle> streams;
  for (const IpcSend& x : sends)
    if (x.call->comm == comm && std::find(streams.begin(), streams.end(), x.call->stream) == streams.end())
      streams.push_back(x.call->stream);
  for (const IpcRecv& x : recvs)
    if (x.call->comm == comm && std::find(streams.begin(), streams.end(), x.call->stream) == streams.end())
      streams.push_back(x.call->stream);
  if (streams.empty()) return ncclSuccess;
  StreamHandle driver = streams.front();
  // Flags are generation numbers: a pair's calls must reach the streams in order.
  GYRE_CHECK(comm->copies->lastCopies.followLast(driver));
  GYRE_CHECK(joinOthers(streams, driver, true));
  for (const IpcSend& x : sends)
    if (x.call->comm == comm && x.scratch)
      GYRE_CHECK(rt->copyAsync(x.scratch, x.call->input, p2pBytes(*x.call), driver));
  for (const IpcSend& x : sends) {
    if (x.call->comm != comm) continue;
    if (x.capturedSlot) {
      s.capturedWith[x.call->root] = true;
      uint32_t* ready = s.peerInbox[x.call->root] + capturedFlag(n, kSendReady, me, x.capturedSlot - 1);
      GYRE_CHECK(rt->streamWriteFlag(driver, ready, 1));
    } else {
      GYRE_CHECK(rt->streamWriteFlag(driver, s.peerInbox[x.call->root] + kSendReady * n + me, uint32_t(x.seq + 1)));
    }
  }
  ncclResult_t mismatch = ncclSuccess;
  for (const IpcRecv& x : recvs) {
    if (x.call->comm != comm) continue;
    const int p = x.call->root;
    FlagOps before, after;
    if (x.capturedSlot) {
      before.add(s.inbox + capturedFlag(n, kSendReady, p, x.capturedSlot - 1), 1, FlagOpKind::kWaitAndClear);
      after.add(s.peerInbox[p] + capturedFlag(n, kCopyDone, me, x.capturedSlot - 1), 1, FlagOpKind::kWrite);
    } else {
      std::lock_guard<std::mutex> lock(s.waitsMutex);
      s.awaitedReady[p] = uint32_t(x.seq + 1);
      before.add(s.inbox + kSendReady * n + p, uint32_t(x.seq + 1), FlagOpKind::kWait);
      after.add(s.peerInbox[p] + kCopyDone * n + me, uint32_t(x.seq + 1), FlagOpKind::kWrite);
    }
    GYRE_CHECK(enqueueFlagOps(before, driver, FlagRunner::kStreamMemOps));
    if (x.sizesMatch) {
      GYRE_CHECK(rt->copyAsync(x.call->output, x.source, p2pBytes(*x.call), driver));
      if (x.mapping) GYRE_CHECK(s.mappings.used(x.mapping, driver, x.capturedSlot != 0));
    } else mismatch = ncclInvalidUsage;  // already failed; the sender's stream still gets its done
    GYRE_CHECK(enqueueFlagOps(after, driver, FlagRunner::kStreamMemOps));
    countP2PPath(*x.call, P2PPath::IpcCopy);
  }
  for (const IpcSend& x : sends) {
    if (x.call->comm != comm) continue;
    const int p = x.call->root;
    FlagOps done;
    if (x.capturedSlot) {
      done.add(s.inbox + capturedFlag(n, kCopyDone, p, x.capturedSlot - 1), 1, FlagOpKind::kWaitAndClear);
    } else {
      std::lock_guard<std::mutex> lock(s.waitsMutex);
      s.awaitedDone[p] = uint32_t(x.seq + 1);
      done.add(s.inbox + kCopyDone * n + p, uint32_t(x.seq + 1), FlagOpKind::kWait);
    }
    GYRE_CHECK(enqueueFlagOps(done, driver, FlagRunner::kStreamMemOps));
    if (x.scratch && !x.capturedSlot) GYRE_CHECK(returnCopyScratch(comm, x.scratch, x.scratchCapacity, driver));
    countP2PPath(*x.call, P2PPath::IpcCopy);
  }
  GYRE_CHECK(comm->copies->lastCopies.note(driver));
  GYRE_CHECK(joinOthers(streams, driver, false));
  return mismatch;
}

}  // namespace

ncclResult_t launchIpcCopies(const std::vector<const DeviceRequest*>& calls, std::vector<DeviceRequest>* staged) {
  std::vector<IpcSend> sends;
  std::vector<IpcRecv> recvs;
  // Every send of the batch is posted before any receive waits, so ranks
  // whose calls cross (each sends to and receives from the other) meet.
  GYRE_CHECK(postSends(calls, &sends, staged));
  ncclResult_t r = takeNotes(calls, &recvs, staged);
  std::vector<DeviceComm*> comms;
  for (const DeviceRequest* c : calls)
    if (std::find(comms.begin(), comms.end(), c->comm) == comms.end()) comms.push_back(c->comm);
  // Stream work is queued even after a failed receive: the notes already
  // posted promise peers this rank's sends.
  for (DeviceComm* comm : comms) {
    OnDevice onDevice;
    ncclResult_t e = onDevice.enter(comm->cudaDev, comm->rank);
    if (e == ncclSuccess) e = enqueueStreamWork(comm, sends, recvs);
    if (e != ncclSuccess && e != ncclInvalidUsage) failAndRelease(comm, e, comm->rank);
    if (r == ncclSuccess) r = e;
  }
  return r;
}

bool directInboxOf(const DeviceComm* comm, int rank, uint32_t** device, uint32_t** host) {
  const IpcCopyState* s = comm->copies && comm->copies->ipc ? comm->copies->ipc.get() : nullptr;
  if (!s || !s->registered || !s->devInboxes) return false;
  uint32_t* inbox = s->mailbox.inboxOf(rank);
  if (!inbox) return false;
  *host = inbox + inboxWords(comm->nranks);
  *device = s->devInboxes + (*host - static_cast<uint32_t*>(s->registered));
  return true;
}

void releaseIpcWaits(DeviceComm* comm) {
  if (comm->copies && comm->copies->ipc) releaseWaits(comm);
}

void releaseIpcCopies(DeviceComm* comm, bool abort) {
  if (!comm->copies || !comm->copies->ipc) return;
  IpcCopyState& s = *comm->copies->ipc;
  if (abort) releaseWaits(comm);
  {
    std::lock_guard<std::mutex> lock(s.watchMutex);
    s.stopping = true;
  }
  s.wake.notify_all();
  if (s.watchdog.joinable()) s.watchdog.join();
  s.mappings.releaseAll();
  for (void* p : s.capturedScratch) freeAfterDeviceWork(DeferredFree::kDevice, p, comm->cudaDev);
  s.capturedScratch.clear();
  // Streams may still wait on or write the inboxes: they stay registered
  // and mapped until the device has run what was queued before now.
  void* mapped = nullptr;
  size_t mappedBytes = 0;
  s.mailbox.detach(&mapped, &mappedBytes);
  releaseAfterDeviceWork([registered = s.registered, mapped, mappedBytes] {
    if (registered) deviceRuntime()->unregisterHost(registered);
    if (mapped) munmap(mapped, mappedBytes);
  }, comm->cudaDev);
  s.registered = nullptr;
  s.inbox = s.inboxHost = nullptr;
}

}  // namespace gyre
