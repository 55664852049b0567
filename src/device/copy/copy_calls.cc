#include "src/device/copy/copy_calls.h"

#include <stdio.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/call/datatypes.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/copy/copy_exchange.h"
#include "src/device/launch_events.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {


void logPath(const DeviceRequest& c, P2PPath path) {
  GYRE_INFO("P2P", "%s of %zu bytes %s rank %d: %s", p2pCallName(c), p2pBytes(c), c.isSend ? "to" : "from", c.root,
            p2pPathName(path));
}


// Sends to self meet receives from self in call order.
ncclResult_t copySelf(const std::vector<const DeviceRequest*>& calls) {
  DeviceRuntime* rt = deviceRuntime();
  std::map<DeviceComm*, std::pair<std::vector<const DeviceRequest*>, std::vector<const DeviceRequest*>>> byComm;
  std::vector<DeviceComm*> order;
  for (const DeviceRequest* c : calls) {
    if (!byComm.count(c->comm)) order.push_back(c->comm);
    auto& lists = byComm[c->comm];
    (c->isSend ? lists.first : lists.second).push_back(c);
  }
  for (DeviceComm* comm : order) {
    auto& [sends, recvs] = byComm[comm];
    if (sends.size() != recvs.size())
      return fail(ncclInvalidUsage, "rank %d: %zu ncclSend(s) to itself but %zu ncclRecv(s) from itself in one "
                  "group; each send to self needs a receive from self in the same group", comm->rank, sends.size(),
                  recvs.size());
    OnDevice onDevice(comm->cudaDev);
    for (size_t i = 0; i < sends.size(); ++i) {
      const DeviceRequest& s = *sends[i];
      const DeviceRequest& r = *recvs[i];
      if (p2pBytes(s) != p2pBytes(r))
        return fail(ncclInvalidUsage, "rank %d: ncclSend to itself of %zu bytes meets an ncclRecv from itself of "
                    "%zu bytes (the %zu-th pair of the group)", comm->rank, p2pBytes(s), p2pBytes(r), i + 1);
      if (observedEagerCall(r)) {
        startDeviceCallEvent(s, 0, 1, "", "");
        startDeviceCallEvent(r, 0, 1, "", "");
      }
      // The copy runs on the receive's stream, after the send's stream
      // reached the send; the send's stream then waits for the copy.
      GYRE_CHECK(joinStreams(s.stream, r.stream));
      if (p2pBytes(s) && r.output != s.input) GYRE_CHECK(rt->copyAsync(r.output, s.input, p2pBytes(s), r.stream));
      GYRE_CHECK(joinStreams(r.stream, s.stream));
      GYRE_CHECK(comm->copies->lastCopies.note(r.stream));
      countP2PPath(s, P2PPath::SelfCopy);
      countP2PPath(r, P2PPath::SelfCopy);
    }
  }
  return ncclSuccess;
}

struct Pending {
  const DeviceRequest* call;
  CopyExchange::Ticket ticket;
  EventHandle ready;
};

struct Scratch {
  const DeviceRequest* call;
  void* buffer;
  size_t capacity;
};

ncclResult_t failPair(const DeviceRequest& c, ncclResult_t code, const std::string& why) {
  return failP2PCall(c, code, "peers in one process, copy path", why);
}

// The second side of a pair: both offers are known, both ready events
// recorded. Copies on this side's stream and tells the first side.
ncclResult_t copyAsSecond(const DeviceRequest& c, const CopyExchange::Ticket& t, const CopyExchange::Offer& mine,
                          const CopyExchange::Offer& other) {
  DeviceRuntime* rt = deviceRuntime();
  CopyExchange& x = *c.comm->copies->exchange;
  const CopyExchange::Offer& send = mine.isSend ? mine : other;
  const CopyExchange::Offer& recv = mine.isSend ? other : mine;
  std::string error = CopyExchange::mismatch(mine, other);
  ncclResult_t r = ncclSuccess;
  EventHandle done = nullptr;
  if (error.empty()) {
    r = rt->streamWaitEvent(c.stream, other.ready);
    if (r == ncclSuccess && send.bytes) r = rt->copyAsync(recv.buffer, send.buffer, send.bytes, c.stream);
    if (r == ncclSuccess) r = rt->eventCreate(&done);
    if (r == ncclSuccess) r = rt->eventRecord(done, c.stream);
    if (r != ncclSuccess) error = lastErrorText();
  }
  if (other.ready) rt->eventDestroy(other.ready);  // its wait is queued (or never will be)
  rt->eventDestroy(mine.ready);   // nobody waits on this side's
  if (!error.empty()) {
    if (done) rt->eventDestroy(done);
    x.complete(t, nullptr, error);
    return failPair(c, r != ncclSuccess ? r : ncclInvalidUsage, error);
  }
  x.complete(t, done, "");
  GYRE_CHECK(c.comm->copies->lastCopies.note(c.stream));
  countP2PPath(c, P2PPath::ProcessCopy);
  return ncclSuccess;
}

// The first side of a pair: waits until the second queued the copy, then
// has its own stream wait for it.
ncclResult_t awaitAsFirst(const Pending& p) {
  const DeviceRequest& c = *p.call;
  DeviceRuntime* rt = deviceRuntime();
  EventHandle done = nullptr;
  bool withdrawn = false;
  ncclResult_t r = awaitPairedCall(c, p.ticket, "peers in one process, copy path", &done, &withdrawn);
  if (withdrawn) rt->eventDestroy(p.ready);  // no copier will wait on it
  GYRE_CHECK(r);
  GYRE_CHECK(rt->streamWaitEvent(c.stream, done));
  rt->eventDestroy(done);
  GYRE_CHECK(c.comm->copies->lastCopies.note(c.stream));
  countP2PPath(c, P2PPath::ProcessCopy);
  return ncclSuccess;
}

ncclResult_t copyInProcess(const std::vector<const DeviceRequest*>& calls, AfterOffers* after) {
  DeviceRuntime* rt = deviceRuntime();
  std::vector<Pending> pending;
  std::vector<Scratch> scratches;
  ncclResult_t r = ncclSuccess;
  for (const DeviceRequest* cp : calls) {
    const DeviceRequest& c = *cp;
    CopyState& s = *c.comm->copies;
    OnDevice onDevice(c.comm->cudaDev);
    if (observedDeviceCalls(c.comm)) startDeviceCallEvent(c, 0, 1, "", "");
    CopyExchange::Offer mine;
    mine.from = c.isSend ? c.comm->rank : c.root;
    mine.to = c.isSend ? c.root : c.comm->rank;
    mine.isSend = c.isSend;
    mine.buffer = c.isSend ? const_cast<void*>(c.input) : c.output;
    mine.bytes = p2pBytes(c);
    if (c.isSend && sendOverwrittenInBatch(c, calls)) {
      Scratch scratch{cp, nullptr, 0};
      if ((r = takeCopyScratch(c.comm, mine.bytes, &scratch.buffer, &scratch.capacity)) != ncclSuccess) break;
      scratches.push_back(scratch);
      if ((r = rt->copyAsync(scratch.buffer, c.input, mine.bytes, c.stream)) != ncclSuccess) break;
      mine.buffer = scratch.buffer;
    }
    if ((r = rt->eventCreate(&mine.ready)) != ncclSuccess) break;
    if ((r = rt->eventRecord(mine.ready, c.stream)) != ncclSuccess) {
      rt->eventDestroy(mine.ready);
      break;
    }
    CopyExchange::Ticket ticket;
    CopyExchange::Offer other;
    std::string error;
    if (!s.exchange->offer(mine, &ticket, &other, &error)) {
      pending.push_back({cp, ticket, mine.ready});
      continue;
    }
    if (!error.empty()) {
      rt->eventDestroy(mine.ready);
      r = failPair(c, ncclRemoteError, error);
      break;
    }
    if ((r = copyAsSecond(c, ticket, mine, other)) != ncclSuccess) break;
  }
  // Offers already made are waited for even after a failure: their peers
  // may be copying into or out of these buffers.
  after->push_back([pending, scratches] {
    ncclResult_t r = ncclSuccess;
    for (const Pending& p : pending) {
      OnDevice onDevice(p.call->comm->cudaDev);
      ncclResult_t w = awaitAsFirst(p);
      if (r == ncclSuccess) r = w;
    }
    // After the copy that reads it (this stream ran it or waits for it).
    for (const Scratch& x : scratches) {
      ncclResult_t e = returnCopyScratch(x.call->comm, x.buffer, x.capacity, x.call->stream);
      if (r == ncclSuccess) r = e;
    }
    return r;
  });
  return r;
}

// A host function: touches host state only.
struct ScratchReturn {
  CopyState* state;
  size_t capacity;
  void* buffer;
};

void returnScratch(void* arg) {
  auto* r = static_cast<ScratchReturn*>(arg);
  {
    std::lock_guard<std::mutex> lock(r->state->scratchMutex);
    r->state->scratch.giveBack(r->buffer, r->capacity);
  }
  delete r;
}

}  // namespace

size_t p2pBytes(const DeviceRequest& c) { return c.count * datatypeSize(c.datatype); }

ncclResult_t failP2PCall(const DeviceRequest& c, ncclResult_t code, const char* path, const std::string& why) {
  ncclResult_t r = fail(code, "%s of %zu bytes %s rank %d at rank %d (%s): %s", p2pCallName(c), p2pBytes(c),
                        c.isSend ? "to" : "from", c.root, c.comm->rank, path, why.c_str());
  c.comm->host->markFailed(r, c.root);
  return r;
}

ncclResult_t awaitPairedCall(const DeviceRequest& c, const CopyExchange::Ticket& t, const char* path,
                             EventHandle* done, bool* withdrawn) {
  Deadline deadline = Deadline::afterSeconds(c.comm->collTimeoutSeconds);
  std::string error;
  *withdrawn = false;
  switch (c.comm->copies->exchange->awaitCopy(t, deadline, &c.comm->abortFlag, done, &error)) {
    case CopyExchange::Outcome::kCopied: return ncclSuccess;
    case CopyExchange::Outcome::kCopyFailed: return failP2PCall(c, ncclInvalidUsage, path, error);
    case CopyExchange::Outcome::kTimedOut:
      *withdrawn = true;
      return failP2PCall(c, ncclRemoteError, path,
                         "rank " + std::to_string(c.root) + " (in this process) made no matching " +
                             (c.isSend ? "ncclRecv" : "ncclSend") + " within GYRE_TIMEOUT (" +
                             std::to_string(static_cast<int>(c.comm->collTimeoutSeconds)) +
                             " s); a thread that drives several ranks must make their calls inside one "
                             "ncclGroupStart/End");
    case CopyExchange::Outcome::kAborted:
      *withdrawn = true;
      return failP2PCall(c, ncclInvalidUsage, path, "the communicator was aborted before the peer made its call");
  }
  return ncclSuccess;
}

bool sendOverwrittenInBatch(const DeviceRequest& send, const std::vector<const DeviceRequest*>& batch) {
  const auto from = reinterpret_cast<uintptr_t>(send.input);
  const size_t bytes = p2pBytes(send);
  for (const DeviceRequest* c : batch) {
    if (c->isSend || c->comm != send.comm) continue;
    const auto to = reinterpret_cast<uintptr_t>(c->output);
    const size_t n = p2pBytes(*c);
    if (bytes && n && from < to + n && to < from + bytes) return true;
  }
  return false;
}

void countP2PPath(const DeviceRequest& c, P2PPath path) {
  c.comm->copies->calls[static_cast<int>(path)].fetch_add(1, std::memory_order_relaxed);
  logPath(c, path);
}

ncclResult_t takeCopyScratch(DeviceComm* comm, size_t bytes, void** out, size_t* capacity) {
  CopyState& s = *comm->copies;
  {
    std::lock_guard<std::mutex> lock(s.scratchMutex);
    if (s.scratch.takeFree(bytes, out, capacity)) return ncclSuccess;
  }
  *capacity = bytes;
  RelaxedCapture relaxed;  // another thread may be capturing in Global mode
  GYRE_CHECK(deviceRuntime()->deviceAlloc(bytes, out));
  std::lock_guard<std::mutex> lock(s.scratchMutex);
  s.scratch.all.push_back(*out);
  return ncclSuccess;
}

ncclResult_t returnCopyScratch(DeviceComm* comm, void* buffer, size_t capacity, StreamHandle stream) {
  auto* r = new ScratchReturn{comm->copies.get(), capacity, buffer};
  if (!stream) {
    returnScratch(r);
    return ncclSuccess;
  }
  ncclResult_t e = deviceRuntime()->hostFunc(stream, returnScratch, r);
  if (e != ncclSuccess) delete r;  // stays allocated until destroy
  return e;
}

const char* p2pPathName(P2PPath p) {
  switch (p) {
    case P2PPath::SelfCopy: return "self copy (one device-to-device copy on the stream)";
    case P2PPath::ProcessCopy: return "copy within this process (copy engine between the ranks' streams)";
    case P2PPath::IpcCopy: return "CUDA IPC copy from another process (copy engine between stream flags)";
    case P2PPath::Staged: return "staged through host memory";
    case P2PPath::KernelCopy: return "point-to-point kernel within this process (CUDA graph capture)";
  }
  return "?";
}

ncclResult_t setupPeerCopies(DeviceComm* comm, const Deadline& deadline) {
  comm->copies = std::make_unique<CopyState>();
  CopyState& s = *comm->copies;
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const PeerInfo& self = peers[comm->rank];
  s.inThisProcess.assign(comm->nranks, false);
  int local = 0, lowest = -1;
  std::map<std::pair<uint64_t, int32_t>, int> perProcess;
  for (int r = 0; r < comm->nranks; ++r) {
    perProcess[{peers[r].hostHash, peers[r].pid}]++;
    if (peers[r].hostHash != self.hostHash || peers[r].pid != self.pid) continue;
    s.inThisProcess[r] = true;
    ++local;
    if (lowest < 0) lowest = r;
  }
  // Every rank sees the same table, so all take part in the meeting or none.
  bool anyShared = std::any_of(perProcess.begin(), perProcess.end(), [](const auto& p) { return p.second > 1; });
  if (!anyShared) return setupIpcCopies(comm, deadline);
  std::vector<uint64_t> hellos(comm->nranks, 0);
  CopyExchange* made = nullptr;
  // GYRE_DEVICE_PATH=staged stages every send/recv between two ranks (the
  // ranks of one process share its environment, so they agree).
  const bool forcedStaged = env::getString("GYRE_DEVICE_PATH") == "staged";
  if (local > 1 && lowest == comm->rank && !forcedStaged) {
    made = new CopyExchange(comm->nranks, local);
    hellos[comm->rank] = reinterpret_cast<uintptr_t>(made);
  }
  ncclResult_t r = comm->bootstrap->allGather(hellos.data(), sizeof(uint64_t), deadline, &comm->abortFlag);
  if (r != ncclSuccess) {
    delete made;  // no other rank took it
    return r;
  }
  if (local > 1 && hellos[lowest]) {
    s.exchange = reinterpret_cast<CopyExchange*>(static_cast<uintptr_t>(hellos[lowest]));
    s.captured = std::make_unique<CapturedCopies>();
  }
  return setupIpcCopies(comm, deadline);
}

P2PPath p2pPathOf(const DeviceRequest& c) {
  if (c.root == c.comm->rank) return P2PPath::SelfCopy;
  const CopyState* s = c.comm->copies.get();
  if (copiesByIpc(c.comm, c.root)) return P2PPath::IpcCopy;  // capture: ipc_copies.cc
  if (!s || !s->exchange || !s->inThisProcess[c.root]) return P2PPath::Staged;
  // A graph's launches cannot wait on another rank's events: captured
  // calls meet by flags in one kernel per rank, which needs both ranks on
  // one GPU or on two GPUs that reach each other's memory (peer access,
  // enabled between a process's GPUs at init); both ranks must capture alike.
  bool capturing = false;
  if (deviceRuntime()->isCapturing(c.stream, &capturing) != ncclSuccess) return P2PPath::Staged;
  if (!capturing) return P2PPath::ProcessCopy;
  const std::vector<PeerInfo>& peers = c.comm->bootstrap->peers();
  return kernelsReachEachOther(peers[c.comm->rank].busId, peers[c.root].busId) ? P2PPath::KernelCopy
                                                                                 : P2PPath::Staged;
}

bool kernelsReachEachOther(int64_t busId, int64_t peerBusId) {
  if (busId == peerBusId) return true;
  DeviceRuntime* rt = deviceRuntime();
  int device = -1, peerDevice = -1;
  return rt->deviceAtBusId(busId, &device) && rt->deviceAtBusId(peerBusId, &peerDevice) &&
         rt->canAccessPeer(device, peerDevice) && rt->canAccessPeer(peerDevice, device);
}

ncclResult_t launchCopyCalls(const std::vector<DeviceRequest>& calls, std::vector<DeviceRequest>* staged) {
  std::vector<const DeviceRequest*> self, inProcess, captured, ipc;
  for (const DeviceRequest& c : calls) {
    if (c.count == 0) continue;  // NCCL skips empty sends and receives on both sides
    switch (p2pPathOf(c)) {
      case P2PPath::SelfCopy: self.push_back(&c); break;
      case P2PPath::ProcessCopy: inProcess.push_back(&c); break;
      case P2PPath::IpcCopy: ipc.push_back(&c); break;
      case P2PPath::KernelCopy: captured.push_back(&c); break;
      case P2PPath::Staged:
        staged->push_back(c);
        countP2PPath(c, P2PPath::Staged);
        break;
    }
  }
  if (!self.empty()) GYRE_CHECK(copySelf(self));
  // Every pair of ranks of this process is offered, eager and captured
  // alike, before any side waits for its peer: one thread may drive both.
  AfterOffers after;
  ncclResult_t r = ncclSuccess;
  if (!inProcess.empty()) r = copyInProcess(inProcess, &after);
  if (!captured.empty() && r == ncclSuccess) r = copyCapturedInProcess(captured, &after);
  for (const auto& wait : after) {
    ncclResult_t w = wait();
    if (r == ncclSuccess) r = w;
  }
  GYRE_CHECK(r);
  if (!ipc.empty()) GYRE_CHECK(launchIpcCopies(ipc, staged));
  return ncclSuccess;
}

bool drainPeerCopies(DeviceComm* comm, bool abort, double seconds) {
  if (!comm->copies) return true;
  CopyState& s = *comm->copies;
  // First: streams may wait on peers that will never write. Their memory is
  // freed only once they are past it (or, on abort, have had the time).
  if (abort) releaseIpcWaits(comm);
  if (abort && s.captured) abortCapturedCopies(s.captured.get());
  if (!s.lastCopies.waitAll(seconds) && !abort) return false;
  releaseIpcCopies(comm, false);
  s.lastCopies.destroy();
  s.scratch.releaseAll([comm](void* p) { freeAfterDeviceWork(DeferredFree::kDevice, p, comm->cudaDev); });
  if (s.captured) releaseCapturedCopies(s.captured.get());
  if (s.exchange) s.exchange->release();
  s.exchange = nullptr;
  return true;
}

}  // namespace gyre
