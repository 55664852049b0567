#include "src/device/direct_calls.h"

#include <signal.h>
#include <stdio.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/device/device_comm.h"
#include "src/config/env.h"
#include "src/debug/deadline.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/call_scalar.h"
#include "src/device/direct_clique.h"
#include "src/device/ipc_registry.h"
#include "src/call/datatypes.h"

namespace gyre {
namespace {

constexpr int kReady = 0;
constexpr int kDone = 1;
constexpr size_t kMaxMappings = 128;  // peer blocks kept mapped; past this, calls stage
constexpr auto kWatchInterval = std::chrono::milliseconds(100);
constexpr uint32_t kReleaseAhead = 1u << 30;  // a generation every pending wait is satisfied by

// What each rank says of a call before any rank runs it directly.
struct CallInfo {
  uint64_t callSeq = 0;
  uint64_t count = 0;
  int32_t root = 0;
  uint8_t coll = 0, datatype = 0, redop = 0;
  uint8_t usable = 0;  // this rank can run it directly
  SharedAllocation input, output;  // the allocations holding the buffers (processes sharing a GPU)
  uint64_t inputOffset = 0, outputOffset = 0;
  const void* inputPtr = nullptr;  // the buffers themselves (ranks of one process)
  void* outputPtr = nullptr;
};

bool sameCall(const CallInfo& a, const CallInfo& b) {
  bool customA = a.redop >= ncclNumOps, customB = b.redop >= ncclNumOps;
  return a.callSeq == b.callSeq && a.count == b.count && a.coll == b.coll && a.datatype == b.datatype &&
         a.root == b.root && (customA ? customB : a.redop == b.redop);
}

// Which of a rank's buffers its peers read or write.
bool inputShared(const DeviceRequest& c, int rank) {
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Reduce: case CollKind::ReduceScatter: return true;
    case CollKind::Broadcast: return rank == c.root;
    default: return false;
  }
}
bool outputShared(const DeviceRequest& c, int rank) {
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Broadcast: case CollKind::AllGather: return true;
    case CollKind::Reduce: return rank == c.root;
    default: return false;
  }
}

size_t inputBytes(const DeviceRequest& c) {
  return c.count * datatypeSize(c.datatype) * inputBlocks(c.coll, c.comm->nranks);
}
size_t outputBytes(const DeviceRequest& c) {
  return c.count * datatypeSize(c.datatype) * outputBlocks(c.coll, c.comm->nranks);
}

CallInfo describeCall(const DeviceRequest& c, bool capturing) {
  DeviceComm* comm = c.comm;
  CallInfo info;
  info.callSeq = ++comm->direct->callSeq;
  info.count = c.count;
  info.root = c.root;
  info.coll = static_cast<uint8_t>(c.coll);
  info.datatype = static_cast<uint8_t>(c.datatype);
  info.redop = static_cast<uint8_t>(c.op);
  info.inputPtr = c.input;
  info.outputPtr = c.output;
  bool ok = !capturing && comm->direct->heldBlocks.size() < kMaxMappings;
  if (comm->direct->clique) {
    info.usable = ok ? 1 : 0;  // addresses of this process: nothing to map
    return info;
  }
  if (ok && inputShared(c, comm->rank))
    ok = describeOwnAllocation(c.input, inputBytes(c), &info.input, &info.inputOffset);
  if (ok && outputShared(c, comm->rank))
    ok = describeOwnAllocation(c.output, outputBytes(c), &info.output, &info.outputOffset);
  info.usable = ok ? 1 : 0;
  return info;
}

// A peer's buffer as this process addresses it.
ncclResult_t peerPointer(DeviceComm* comm, int peer, const SharedAllocation& a, uint64_t offset, void** out) {
  void* base = nullptr;
  GYRE_CHECK(mapPeerAllocation(comm->bootstrap->peers()[peer].pid, a, &comm->direct->heldBlocks, &base));
  *out = static_cast<char*>(base) + offset;
  return ncclSuccess;
}

// Everyone's input (or output) as this rank addresses it, by rank.
ncclResult_t buffersOf(DeviceComm* comm, const std::vector<CallInfo>& infos, const DeviceRequest& c, bool input,
                       std::vector<char*>* out) {
  out->assign(comm->nranks, nullptr);
  for (int r = 0; r < comm->nranks; ++r) {
    bool shared = input ? inputShared(c, r) : outputShared(c, r);
    if (r == comm->rank) {
      (*out)[r] = static_cast<char*>(input ? const_cast<void*>(c.input) : c.output);
    } else if (shared && comm->direct->clique) {
      (*out)[r] = static_cast<char*>(input ? const_cast<void*>(infos[r].inputPtr) : infos[r].outputPtr);
    } else if (shared) {
      void* p = nullptr;
      GYRE_CHECK(peerPointer(comm, r, input ? infos[r].input : infos[r].output,
                             input ? infos[r].inputOffset : infos[r].outputOffset, &p));
      (*out)[r] = static_cast<char*>(p);
    }
  }
  return ncclSuccess;
}

// This rank's share of [0, count): split in 16-byte units so shares of
// aligned buffers stay aligned.
void shareOf(size_t count, size_t elementSize, int rank, int nranks, size_t* first, size_t* n) {
  size_t unit = std::max<size_t>(1, 16 / elementSize);
  size_t units = (count + unit - 1) / unit;
  size_t lo = units * rank / nranks * unit, hi = units * (rank + 1) / nranks * unit;
  *first = std::min(lo, count);
  *n = std::min(hi, count) - *first;
}

ncclResult_t buildDirectCall(const DeviceRequest& c, const std::vector<CallInfo>& infos, DirectCall* out) {
  DeviceComm* comm = c.comm;
  const int n = comm->nranks, me = comm->rank;
  const size_t es = datatypeSize(c.datatype);
  std::vector<char*> in, outs;
  GYRE_CHECK(buffersOf(comm, infos, c, true, &in));
  GYRE_CHECK(buffersOf(comm, infos, c, false, &outs));
  DirectCall d;
  d.datatype = static_cast<uint8_t>(c.datatype);
  d.redop = static_cast<uint8_t>(c.op);
  d.nranks = n;
  d.abort = comm->direct->abortWord;
  setCallScalar(c, &d);
  size_t first = 0, count = 0;
  switch (c.coll) {
    case CollKind::AllReduce: case CollKind::Reduce: case CollKind::Broadcast: {
      shareOf(c.count, es, me, n, &first, &count);
      const size_t off = first * es;
      if (c.coll == CollKind::Broadcast) {
        d.src[d.nsrc++] = in[c.root] + off;
      } else {
        for (int r = 0; r < n; ++r) d.src[d.nsrc++] = in[r] + off;
        d.reduce = 1;
      }
      if (c.coll == CollKind::Reduce) d.dst[d.ndst++] = outs[c.root] + off;
      else for (int r = 0; r < n; ++r) d.dst[d.ndst++] = outs[r] + off;
      break;
    }
    case CollKind::ReduceScatter:
      count = c.count;
      for (int r = 0; r < n; ++r) d.src[d.nsrc++] = in[r] + me * count * es;
      d.dst[d.ndst++] = outs[me];
      d.reduce = 1;
      break;
    case CollKind::AllGather:
      count = c.count;
      d.src[d.nsrc++] = in[me];
      for (int r = 0; r < n; ++r) d.dst[d.ndst++] = outs[r] + me * count * es;
      break;
    default:
      return fail(ncclInternalError, "direct executor: %s is not a collective it runs", collName(c.coll));
  }
  d.count = count;
  *out = d;
  return ncclSuccess;
}

std::string describeInfo(const CallInfo& i) {
  char text[160];
  snprintf(text, sizeof(text), "%s #%llu (count %llu, datatype %d, op %d, root %d)",
           collName(static_cast<CollKind>(i.coll)), static_cast<unsigned long long>(i.callSeq),
           static_cast<unsigned long long>(i.count), i.datatype, i.redop, i.root);
  return text;
}

// Every rank sees the same table, so every rank reaches the same verdict.
ncclResult_t checkAgreement(DeviceComm* comm, const std::vector<CallInfo>& infos) {
  for (int r = 1; r < comm->nranks; ++r) {
    if (sameCall(infos[0], infos[r])) continue;
    ncclResult_t res = fail(ncclInvalidUsage, "mismatched calls: rank 0 made %s while rank %d made %s",
                            describeInfo(infos[0]).c_str(), r, describeInfo(infos[r]).c_str());
    comm->hooks->markFailed(res, -1);
    return res;
  }
  return ncclSuccess;
}

// Stream order: ready to every peer, wait for theirs, this rank's share,
// done to every peer, wait for theirs.
ncclResult_t enqueueDirect(DeviceComm* comm, const DirectCall& call, StreamHandle stream) {
  DeviceRuntime* rt = deviceRuntime();
  DirectState& d = *comm->direct;
  const int n = comm->nranks, me = comm->rank;
  const uint32_t g = ++d.generation;
  // Signals are generation numbers, and a wait passes at any later one: a
  // call on another stream that ran ahead of the previous call would tell
  // the peers this rank is ready for both. So calls follow each other.
  GYRE_CHECK(d.lastCall.followLast(stream));
  for (int phase : {kReady, kDone}) {
    if (phase == kDone) GYRE_CHECK(rt->launchDirect(call, stream));
    for (int p = 0; p < n; ++p)
      if (p != me) GYRE_CHECK(rt->streamWriteFlag(stream, d.peerInbox[p] + phase * n + me, g));
    for (int p = 0; p < n; ++p)
      if (p != me) GYRE_CHECK(rt->streamWaitFlag(stream, d.inbox + phase * n + p, g));
  }
  GYRE_CHECK(d.lastCall.note(stream));
  d.callsRun.fetch_add(1);
  return ncclSuccess;
}

// Satisfies every wait this rank's streams have or will have on its inbox,
// and keeps its kernels from touching peer memory.
void releaseWaits(DeviceComm* comm) {
  DirectState& d = *comm->direct;
  if (d.released.exchange(true)) return;
  const uint32_t stop = 1;
  deviceRuntime()->copySync(d.abortWord, &stop, sizeof(stop));  // may fail in a broken context: nothing runs then
  if (!d.inbox) return;  // ranks of one process wait on events, which need no release
  std::vector<uint32_t> values(2 * comm->nranks, d.generation + kReleaseAhead);
  deviceRuntime()->copySync(d.inbox, values.data(), values.size() * sizeof(uint32_t));
}

void failAndRelease(DeviceComm* comm, ncclResult_t r, int culprit) {
  GYRE_WARN("%s", lastErrorText());
  comm->hooks->markFailed(r, culprit);
  releaseWaits(comm);
}

// Gone, or a zombie its parent has not reaped yet (kill(pid, 0) still works).
bool processGone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return false;
  char state = 0;
  int fields = fscanf(f, "%*d (%*[^)]) %c", &state);
  fclose(f);
  return fields == 1 && (state == 'Z' || state == 'X');
}

// A peer process that is gone never writes its flags: fail, naming it.
bool checkPeersAlive(DeviceComm* comm) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank || !processGone(peers[p].pid)) continue;
    failAndRelease(comm, fail(ncclRemoteError, "rank %d (%s pid %d), which shares this GPU, died; the direct "
                              "collectives of rank %d that wait on it stop", p, peers[p].host, peers[p].pid,
                              comm->rank), p);
    return false;
  }
  return true;
}

// Signals that stop moving for GYRE_TIMEOUT while a call is pending: some
// stream (a peer's, or this rank's own) never reaches the call.
struct StallClock {
  uint64_t signature = 0;
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
};

void checkStalled(DeviceComm* comm, StallClock* clock) {
  DirectState& d = *comm->direct;
  DeviceRuntime* rt = deviceRuntime();
  const int n = comm->nranks, me = comm->rank;
  const uint32_t g = d.generation.load();
  std::vector<uint32_t> flags(2 * n);
  uint32_t mineOut = 0;  // this rank's ready as a peer's inbox holds it
  if (rt->copySync(flags.data(), d.inbox, flags.size() * sizeof(uint32_t)) != ncclSuccess ||
      rt->copySync(&mineOut, d.peerInbox[me == 0 ? 1 : 0] + kReady * n + me, sizeof(uint32_t)) != ncclSuccess)
    return;
  auto behind = [g](uint32_t v) { return static_cast<int32_t>(v - g) < 0; };
  uint64_t signature = mineOut;
  bool pending = false;
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    signature = signature * 1000003 + flags[kReady * n + p] * 31 + flags[kDone * n + p];
    pending |= behind(flags[kDone * n + p]);
  }
  auto now = std::chrono::steady_clock::now();
  if (!pending || signature != clock->signature) {
    *clock = {signature, now};
    return;
  }
  if (std::chrono::duration<double>(now - clock->since).count() < comm->collTimeoutSeconds) return;
  if (behind(mineOut)) {
    failAndRelease(comm, fail(ncclRemoteError, "direct collective #%u: the stream of rank %d has not reached it "
                              "after %.0f s (GYRE_TIMEOUT): earlier work on that stream does not finish", g, me,
                              comm->collTimeoutSeconds), me);
    return;
  }
  for (int phase : {kReady, kDone})
    for (int p = 0; p < n; ++p)
      if (p != me && behind(flags[phase * n + p])) {
        failAndRelease(comm, fail(ncclRemoteError, "direct collective #%u: rank %d has not %s it after %.0f s "
                                  "(GYRE_TIMEOUT): its stream is stalled or it stopped", g, p,
                                  phase == kReady ? "reached" : "finished", comm->collTimeoutSeconds), p);
        return;
      }
}

void watchPeers(DeviceComm* comm) {
  DirectState& d = *comm->direct;
  ScopedLogRank logRank(comm->rank);
  deviceRuntime()->setDevice(comm->cudaDev);  // the watchdog's copies go to the communicator's GPU
  StallClock clock;
  std::unique_lock<std::mutex> lock(d.watchMutex);
  while (!d.wake.wait_for(lock, kWatchInterval, [&] { return d.stopping; })) {
    if (d.released.load()) continue;
    if (comm->abortFlag.load()) {
      releaseWaits(comm);
      continue;
    }
    if (checkPeersAlive(comm)) checkStalled(comm, &clock);
  }
}

bool oneProcessPerRankOnThisGpu(const DeviceComm* comm) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const PeerInfo& self = peers[comm->rank];
  for (int r = 0; r < comm->nranks; ++r) {
    const PeerInfo& p = peers[r];
    if (p.hostHash != self.hostHash || p.busId != self.busId) return false;
    if (r != comm->rank && p.pid == self.pid) return false;
  }
  return true;
}

bool allRanksInThisProcessOnThisGpu(const DeviceComm* comm) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const PeerInfo& self = peers[comm->rank];
  for (const PeerInfo& p : peers)
    if (p.hostHash != self.hostHash || p.busId != self.busId || p.pid != self.pid) return false;
  return true;
}

// The abort word the direct kernels read (set: skip the work).
ncclResult_t allocateAbortWord(DeviceComm* comm) {
  DirectState& d = *comm->direct;
  void* word = nullptr;
  GYRE_CHECK(deviceRuntime()->deviceAlloc(sizeof(uint32_t), &word));
  d.abortWord = static_cast<uint32_t*>(word);
  return deviceRuntime()->memsetSync(word, 0, sizeof(uint32_t));
}

void destroyEvent(void* e) { deviceRuntime()->eventDestroy(e); }

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

// Ranks of different processes: the inbox this rank's peers signal into,
// and the peers' inboxes, which travel as CUDA IPC handles.
ncclResult_t setupAcrossProcesses(DeviceComm* comm, const Deadline& deadline) {
  DirectState& d = *comm->direct;
  DeviceRuntime* rt = deviceRuntime();
  const size_t inboxBytes = 2 * comm->nranks * sizeof(uint32_t);
  void* inbox = nullptr;
  GYRE_CHECK(rt->deviceAlloc(inboxBytes, &inbox));
  d.inbox = static_cast<uint32_t*>(inbox);
  GYRE_CHECK(rt->memsetSync(d.inbox, 0, inboxBytes));
  // Through the registry like any buffer: the inbox may share a block with
  // the application's small buffers.
  std::vector<SharedAllocation> inboxes(comm->nranks);
  uint64_t offset = 0;
  if (!describeOwnAllocation(d.inbox, inboxBytes, &inboxes[comm->rank], &offset))
    return fail(ncclUnhandledCudaError, "direct executor: cannot share this rank's inbox by CUDA IPC: %s",
                lastErrorText());
  GYRE_CHECK(comm->bootstrap->allGather(inboxes.data(), sizeof(SharedAllocation), deadline, &comm->abortFlag));
  d.peerInbox.assign(comm->nranks, nullptr);
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank) {
      d.peerInbox[p] = d.inbox;
      continue;
    }
    void* mapped = nullptr;
    GYRE_CHECK(peerPointer(comm, p, inboxes[p], 0, &mapped));
    d.peerInbox[p] = static_cast<uint32_t*>(mapped);
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t setupDirect(DeviceComm* comm, const Deadline& deadline) {
  const std::string mode = env::getString("GYRE_DEVICE_PATH");
  const bool forced = mode == "direct";
  if (!forced && mode != "auto" && !mode.empty()) return ncclSuccess;
  if (comm->nranks < 2 || comm->nranks > kMaxDirectRanks) {
    if (!forced) return ncclSuccess;
    return fail(ncclInvalidUsage, "GYRE_DEVICE_PATH=direct needs 2 to %d ranks on one GPU (rank %d of %d); unset "
                "it", kMaxDirectRanks, comm->rank, comm->nranks);
  }
  const bool inProcess = allRanksInThisProcessOnThisGpu(comm);
  size_t minBytes = 0;
  if (inProcess) {
    // Waits are stream operations and the host meets its peers per call, so
    // the ranks' launches must not block each other (CUDA_LAUNCH_BLOCKING):
    // that is exactly when the kernel executor was not chosen.
    if (!comm->deviceKernels) {
      if (!forced) return ncclSuccess;
      return fail(ncclInvalidUsage, "GYRE_DEVICE_PATH=direct: ranks of one process on one GPU run direct only "
                  "where collective kernels can run too (not under CUDA_LAUNCH_BLOCKING=1 or NCCL_P2P_DISABLE); "
                  "unset it");
    }
    int64_t bytes = 0;
    if (!forced) GYRE_CHECK(env::getInt("GYRE_DIRECT_MIN_BYTES", &bytes));
    minBytes = static_cast<size_t>(bytes);
  } else if (!oneProcessPerRankOnThisGpu(comm)) {
    if (!forced) return ncclSuccess;
    return fail(ncclInvalidUsage, "GYRE_DEVICE_PATH=direct needs 2 to %d ranks on one GPU, either each in its own "
                "process or all in one (rank %d of %d); unset it to stage through host memory", kMaxDirectRanks,
                comm->rank, comm->nranks);
  }
  comm->direct = std::make_unique<DirectState>();
  comm->direct->minBytes = minBytes;
  GYRE_CHECK(allocateAbortWord(comm));
  if (inProcess) {
    GYRE_CHECK(setupInProcess(comm, deadline));
  } else {
    GYRE_CHECK(setupAcrossProcesses(comm, deadline));
    // Stream waits on flags can wait forever on a peer process; events of
    // ranks of one process wait only on work already queued.
    comm->direct->watchdog = std::thread([comm] { watchPeers(comm); });
  }
  if (inProcess)
    GYRE_INFO("INIT", "device collectives of %zu bytes and more run direct: %d ranks of this process share this "
              "GPU", minBytes, comm->nranks);
  else
    GYRE_INFO("INIT", "device collectives run direct: %d processes share this GPU through CUDA IPC", comm->nranks);
  return ncclSuccess;
}

bool takesDirect(const DeviceRequest& c) {
  const DirectState* d = c.comm->direct.get();
  if (!d) return false;
  if (!d->clique) return true;  // processes sharing a GPU: every collective (some then staged, all agreeing)
  if (std::max(inputBytes(c), outputBytes(c)) < d->minBytes) return false;
  // A captured call would replay its signals' generation numbers: kernels.
  bool capturing = false;
  return deviceRuntime()->isCapturing(c.stream, &capturing) == ncclSuccess && !capturing;
}

namespace {

// What ranks of one process post to their clique per call: their CallInfo,
// then that their share is queued (its done event recorded).
enum class Meeting : uint64_t { kCall = 0, kShareQueued = 1 };
uint64_t meetingKey(uint64_t callSeq, Meeting m) { return callSeq * 2 + static_cast<uint64_t>(m); }

// Fails the communicator of `c`: some rank did not reach a meeting in time.
ncclResult_t missedMeeting(const DeviceRequest& c, ncclResult_t r, const std::string& why) {
  DeviceComm* comm = c.comm;
  r = fail(r, "%s: the ranks did not all reach this call within GYRE_TIMEOUT (%.0f s): %s", collName(c.coll),
           comm->collTimeoutSeconds, why.c_str());
  comm->hooks->markFailed(r, -1);
  return r;
}

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

// Every rank's CallInfo of call `c` into `infos` (this rank's is in place).
ncclResult_t gatherInfos(const DeviceRequest& c, std::vector<CallInfo>* infos) {
  DeviceComm* comm = c.comm;
  if (comm->direct->clique) return meet(c, (*infos)[comm->rank].callSeq, Meeting::kCall, infos);
  Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
  ncclResult_t r = comm->bootstrap->allGather(infos->data(), sizeof(CallInfo), deadline, &comm->abortFlag);
  return r == ncclSuccess ? ncclSuccess : missedMeeting(c, r, lastErrorText());
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
    DirectCall call;
    GYRE_CHECK(buildDirectCall(c, infos, &call));
    for (int p = 0; p < comm->nranks; ++p)
      if (p != comm->rank) GYRE_CHECK(rt->streamWaitEvent(c.stream, d.clique->readyEvents[p]));
    GYRE_CHECK(rt->launchDirect(call, c.stream));
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

// Ranks of different processes: one call at a time, over the bootstrap ring
// and stream flags.
ncclResult_t launchAcrossProcesses(const DeviceRequest& c, std::vector<DeviceRequest>* staged) {
  DeviceComm* comm = c.comm;
  bool capturing = false;
  GYRE_CHECK(deviceRuntime()->isCapturing(c.stream, &capturing));
  std::vector<CallInfo> infos(comm->nranks);
  infos[comm->rank] = describeCall(c, capturing);
  GYRE_CHECK(gatherInfos(c, &infos));
  GYRE_CHECK(checkAgreement(comm, infos));
  if (!std::all_of(infos.begin(), infos.end(), [](const CallInfo& i) { return i.usable != 0; })) {
    staged->push_back(c);
    return ncclSuccess;
  }
  DirectCall call;
  ncclResult_t r = buildDirectCall(c, infos, &call);
  if (r == ncclSuccess) r = enqueueDirect(comm, call, c.stream);
  if (r != ncclSuccess) failAndRelease(comm, r, comm->rank);  // peers may already wait on this rank's signals
  return r;
}

}  // namespace

ncclResult_t launchDirectCalls(const std::vector<DeviceRequest>& calls, std::vector<DeviceRequest>* staged) {
  std::vector<const DeviceRequest*> inProcess;
  for (const DeviceRequest& c : calls) {
    if (c.count == 0) continue;
    if (c.comm->direct->clique) inProcess.push_back(&c);
    else GYRE_CHECK(launchAcrossProcesses(c, staged));
  }
  return inProcess.empty() ? ncclSuccess : launchInProcess(inProcess);
}

bool drainDirect(DeviceComm* comm, bool abort, double seconds) {
  if (!comm->direct) return true;
  DirectState& d = *comm->direct;
  DeviceRuntime* rt = deviceRuntime();
  if (abort) releaseWaits(comm);
  if (!d.lastCall.waitAll(seconds)) return false;
  {
    std::lock_guard<std::mutex> lock(d.watchMutex);
    d.stopping = true;
  }
  d.wake.notify_all();
  if (d.watchdog.joinable()) d.watchdog.join();
  d.lastCall.destroy();
  releasePeerBlocks(&d.heldBlocks);
  // Peers' streams use this rank's signals until they drained too: ranks of
  // one process leave their events to the clique's last holder (one thread
  // may destroy them one after the other, so they cannot meet here);
  // processes meet before freeing the inbox.
  if (d.clique) {
    d.clique->release(destroyEvent);
  } else {
    if (!abort) {
      Deadline deadline = Deadline::afterSeconds(seconds);
      comm->bootstrap->barrier(deadline, &comm->abortFlag);
    }
    rt->deviceFree(d.inbox);
  }
  rt->deviceFree(d.abortWord);
  comm->direct.reset();
  return true;
}

}  // namespace gyre
