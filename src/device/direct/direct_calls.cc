#include "src/device/direct/direct_calls.h"

#include <signal.h>
#include <stdio.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/device/device_comm.h"
#include "src/config/env.h"
#include "src/debug/deadline.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/call_scalar.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/copy/ipc_copies.h"
#include "src/device/direct/direct_inprocess.h"
#include "src/device/direct/direct_share.h"
#include "src/device/device_words.h"
#include "src/device/flag_ops.h"
#include "src/device/launch_events.h"
#include "src/device/on_device.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/ipc_registry.h"
#include "src/device/process_liveness.h"
#include "src/call/datatypes.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

constexpr int kReady = 0;
constexpr int kDone = 1;
constexpr auto kWatchInterval = std::chrono::milliseconds(100);
constexpr uint32_t kReleaseAhead = 1u << 30;  // a generation every pending wait is satisfied by

// An inbox: this rank's [kReady][peer] and [kDone][peer] generations, then
// its captured calls' flags (direct_share.h).
size_t inboxWords(int nranks) { return directInboxWords(nranks); }

// Stream order: ready to every peer, wait for theirs, this rank's share
// (every share on the leader, none on the others), done to every peer, wait
// for theirs.
ncclResult_t enqueueDirect(const DeviceRequest& c, uint64_t seq, const std::vector<DirectCall>& calls) {
  DeviceComm* comm = c.comm;
  const StreamHandle stream = c.stream;
  DeviceRuntime* rt = deviceRuntime();
  DirectState& d = *comm->direct;
  const int n = comm->nranks, me = comm->rank;
  const uint32_t g = ++d.generation;
  const bool observed = observedDeviceCalls(comm);
  void* callEvent = startDirectCallEvent(c, seq, calls, observed);
  // Signals are generation numbers, and a wait passes at any later one: a
  // call on another stream that ran ahead of the previous call would tell
  // the peers this rank is ready for both. So calls follow each other.
  GYRE_CHECK(d.lastCall.followLast(stream));
  for (int phase : {kReady, kDone}) {
    if (phase == kDone) GYRE_CHECK(launchShares(c, calls, observed, callEvent));
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
  d.flagWatch.abort();  // no CUDA call: reaches the flag kernels behind any blocked queue
  const uint32_t stop = 1;
  deviceRuntime()->postWords(d.abortWord, &stop, 1);  // may fail in a broken context: nothing runs then
  if (!d.inbox) return;  // ranks of one process wait on events, which need no release
  // Captured calls' waits want 1 (and clear it after): every one is satisfied.
  std::vector<uint32_t> values(inboxWords(comm->nranks), 1);
  std::fill(values.begin(), values.begin() + 2 * comm->nranks, d.generation + kReleaseAhead);
  if (d.inboxHost) {
    // Host stores reach the waiting streams whatever their hardware queue holds.
    for (size_t i = 0; i < values.size(); ++i) __atomic_store_n(&d.inboxHost[i], values[i], __ATOMIC_RELEASE);
    return;
  }
  deviceRuntime()->postWords(d.inbox, values.data(), values.size());
}

void failAndRelease(DeviceComm* comm, ncclResult_t r, int culprit) {
  GYRE_WARN("%s", lastErrorText());
  comm->host->markFailed(r, culprit);
  releaseWaits(comm);
}

}  // namespace

void noteDirectRun(DirectState& d, const CallInfo& info) {
  std::lock_guard<std::mutex> lock(d.lastRunMutex);
  d.lastRun = info;
}

void checkDirectFault(DeviceComm* comm) {
  DirectState* d = comm->direct.get();
  if (!d || d->faulted.load() || !d->lastCall.anyFailed() || d->faulted.exchange(true)) return;
  CallInfo last;
  {
    std::lock_guard<std::mutex> lock(d->lastRunMutex);
    last = d->lastRun;
  }
  std::string why = lastErrorText();
  failAndRelease(comm, fail(ncclUnhandledCudaError, "rank %d: the GPU (device %d) reports a sticky CUDA error after "
                            "a direct collective (the last this rank ran: %s): %s; this process can no longer use it",
                            comm->rank, comm->cudaDev, describeInfo(last).c_str(), why.c_str()), comm->rank);
}

void pollDirectTimeout(DeviceComm* comm) {
  DirectState* d = comm->direct.get();
  int peer = -1;
  uint32_t step = 0;
  if (!d || !d->flagWatch.takeTimeout(&peer, &step)) return;
  failAndRelease(comm, fail(ncclRemoteError, "rank %d: the flag kernel of a captured direct collective (capture "
                            "slot %u) waited %.0f s (GYRE_TIMEOUT) for rank %d's \"%s\" signal; rank %d's graph "
                            "was not launched, or its kernel never ran (a stream that shares this one's hardware "
                            "queue holds it, CUDA_DEVICE_MAX_CONNECTIONS)", comm->rank, capturedSignalSlot(step),
                            comm->collTimeoutSeconds, peer, capturedSignalName(step), peer), peer);
}

namespace {

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
// The flags are read without waiting on a stream (device_words.h): while a
// read is queued the last values stand, so a blocked stream shows as no
// progress.
struct StallClock {
  uint64_t signature = 0;
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
  DeviceWordReader reader;
  std::vector<uint32_t> words;  // this rank's inbox, then its ready as a peer's inbox holds it
  std::chrono::steady_clock::time_point readAt = std::chrono::steady_clock::now();  // the last completed read
};

void checkStalled(DeviceComm* comm, StallClock* clock) {
  DirectState& d = *comm->direct;
  const int n = comm->nranks, me = comm->rank;
  const uint32_t g = d.generation.load();
  const int other = me == 0 ? 1 : 0;
  if (d.inboxHost) {  // host memory: read as it is
    clock->words.resize(2 * size_t(n) + 1);
    for (size_t i = 0; i < 2 * size_t(n); ++i) clock->words[i] = __atomic_load_n(&d.inboxHost[i], __ATOMIC_ACQUIRE);
    clock->words[2 * n] = __atomic_load_n(&d.peerInboxHost[other][kReady * n + me], __ATOMIC_ACQUIRE);
    clock->readAt = std::chrono::steady_clock::now();
  } else {
    const std::vector<DeviceWordReader::Range> ranges = {{d.inbox, 2 * size_t(n)},
                                                         {d.peerInbox[other] + kReady * n + me, 1}};
    if (clock->reader.read(ranges, &clock->words)) clock->readAt = std::chrono::steady_clock::now();
  }
  if (clock->words.empty()) clock->words.assign(2 * n + 1, 0);
  const std::vector<uint32_t> flags(clock->words.begin(), clock->words.begin() + 2 * n);
  const uint32_t mineOut = clock->words[2 * n];
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
    clock->signature = signature;
    clock->since = now;
    return;
  }
  if (std::chrono::duration<double>(now - clock->since).count() < comm->collTimeoutSeconds) return;
  if (std::chrono::duration<double>(now - clock->readAt).count() >= comm->collTimeoutSeconds) {
    failAndRelease(comm, fail(ncclRemoteError, "direct collective #%u: rank %d's GPU has not run a copy of its "
                              "flags for %.0f s (GYRE_TIMEOUT): a stream of this process that shares its hardware "
                              "queue (CUDA_DEVICE_MAX_CONNECTIONS) is blocked, waiting for a peer that has not "
                              "reached the call or behind work that does not finish", g, me,
                              comm->collTimeoutSeconds), me);
    return;
  }
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
  enterDeviceOfThisThread(comm->cudaDev);  // the watchdog's copies go to the communicator's GPU
  relaxCaptureModeOfThisThread();
  StallClock clock;
  std::unique_lock<std::mutex> lock(d.watchMutex);
  while (!d.wake.wait_for(lock, kWatchInterval, [&] { return d.stopping; })) {
    if (d.released.load()) continue;
    if (comm->abortFlag.load()) {
      releaseWaits(comm);
      continue;
    }
    checkDirectFault(comm);
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

// The abort word the direct kernels read (set: skip the work).
ncclResult_t allocateAbortWord(DeviceComm* comm) {
  DirectState& d = *comm->direct;
  void* word = nullptr;
  GYRE_CHECK(deviceRuntime()->deviceAlloc(sizeof(uint32_t), &word));
  d.abortWord = static_cast<uint32_t*>(word);
  return deviceRuntime()->memsetSync(word, 0, sizeof(uint32_t));
}

// GYRE_DIRECT_LEADER: whether rank 0 runs every rank's share (default
// yes). Processes' contexts time-slice the GPU without MPS, so one context
// running kernels (the others' streams only signal and wait, which the GPU's
// front end does without an SM) avoids waiting for time slices; in one
// process one full-GPU kernel is as fast as one half-GPU kernel per rank.
// The default is fitted on an H100 (docs/CALIBRATION.md, device rows).
ncclResult_t leaderChoice(bool* leader) {
  int64_t v = 1;
  GYRE_CHECK(env::getInt("GYRE_DIRECT_LEADER", &v));
  *leader = v != 0;
  return ncclSuccess;
}

// What each process says of itself at setup.
struct ProcessSetup {
  SharedAllocation inbox;
  int32_t leaderRunsAll = 0;  // its GYRE_DIRECT_LEADER
};

// Ranks of different processes: the inbox this rank's peers signal into,
// and the peers' inboxes, which travel as CUDA IPC handles; all ranks must
// agree on GYRE_DIRECT_LEADER.
// The inboxes in the host's registered mailbox (ipc_copies.h): whether
// every rank's could be found there.
bool inboxesInHostMemory(DeviceComm* comm) {
  DirectState& d = *comm->direct;
  const int n = comm->nranks;
  std::vector<uint32_t*> device(n, nullptr), host(n, nullptr);
  for (int p = 0; p < n; ++p)
    if (!directInboxOf(comm, p, &device[p], &host[p])) return false;
  d.inbox = device[comm->rank];
  d.inboxHost = host[comm->rank];
  d.peerInbox = device;
  d.peerInboxHost = host;
  return true;
}

ncclResult_t setupAcrossProcesses(DeviceComm* comm, const Deadline& deadline) {
  DirectState& d = *comm->direct;
  // Every rank registered the mailbox's inboxes, or said so and stopped
  // copying by IPC with this one: agree on where the inboxes live.
  std::vector<uint8_t> inHost(comm->nranks, 0);
  inHost[comm->rank] = inboxesInHostMemory(comm) ? 1 : 0;
  GYRE_CHECK(comm->bootstrap->allGather(inHost.data(), 1, deadline, &comm->abortFlag));
  if (std::all_of(inHost.begin(), inHost.end(), [](uint8_t v) { return v != 0; })) {
    bool leader = true;
    GYRE_CHECK(leaderChoice(&leader));
    std::vector<int32_t> leaders(comm->nranks, 0);
    leaders[comm->rank] = leader ? 1 : 0;
    GYRE_CHECK(comm->bootstrap->allGather(leaders.data(), sizeof(int32_t), deadline, &comm->abortFlag));
    for (int p = 0; p < comm->nranks; ++p)
      if (leaders[p] != leaders[0])
        return fail(ncclInvalidUsage, "GYRE_DIRECT_LEADER differs between ranks (rank 0: %d, rank %d: %d); set it "
                    "alike on every rank", leaders[0], p, leaders[p]);
    d.leaderRunsAll = leaders[0] != 0;
    for (uint32_t* inbox : d.peerInbox) d.capturedFlags.push_back(inbox + 2 * comm->nranks);
    return ncclSuccess;
  }
  d.inbox = d.inboxHost = nullptr;
  d.peerInbox.clear();
  d.peerInboxHost.clear();
  DeviceRuntime* rt = deviceRuntime();
  const size_t inboxBytes = inboxWords(comm->nranks) * sizeof(uint32_t);
  void* inbox = nullptr;
  GYRE_CHECK(rt->deviceAlloc(inboxBytes, &inbox));
  d.inbox = static_cast<uint32_t*>(inbox);
  GYRE_CHECK(rt->memsetSync(d.inbox, 0, inboxBytes));
  // Through the registry like any buffer: the inbox may share a block with
  // the application's small buffers.
  std::vector<ProcessSetup> setups(comm->nranks);
  uint64_t offset = 0;
  if (!describeOwnAllocation(d.inbox, inboxBytes, &setups[comm->rank].inbox, &offset))
    return fail(ncclUnhandledCudaError, "direct executor: cannot share this rank's inbox by CUDA IPC: %s",
                lastErrorText());
  bool leader = true;
  GYRE_CHECK(leaderChoice(&leader));
  setups[comm->rank].leaderRunsAll = leader ? 1 : 0;
  GYRE_CHECK(comm->bootstrap->allGather(setups.data(), sizeof(ProcessSetup), deadline, &comm->abortFlag));
  for (int p = 0; p < comm->nranks; ++p)
    if (setups[p].leaderRunsAll != setups[0].leaderRunsAll)
      return fail(ncclInvalidUsage, "GYRE_DIRECT_LEADER differs between ranks (rank 0: %d, rank %d: %d); set it "
                  "alike on every rank", setups[0].leaderRunsAll, p, setups[p].leaderRunsAll);
  d.leaderRunsAll = setups[0].leaderRunsAll != 0;
  d.peerInbox.assign(comm->nranks, nullptr);
  for (int p = 0; p < comm->nranks; ++p) {
    if (p == comm->rank) {
      d.peerInbox[p] = d.inbox;
      continue;
    }
    void* mapped = nullptr;
    GYRE_CHECK(peerPointer(comm, p, setups[p].inbox, 0, &mapped));
    d.peerInbox[p] = static_cast<uint32_t*>(mapped);
  }
  for (uint32_t* inbox : d.peerInbox) d.capturedFlags.push_back(inbox + 2 * comm->nranks);
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
    // Captured calls (and calls under GYRE_DIRECT_MIN_BYTES) fall back to
    // the kernels, so direct is set up only where they run. Under
    // CUDA_LAUNCH_BLOCKING=1 or NCCL_P2P_DISABLE such ranks stage instead;
    // direct there is untried on a GPU.
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
  if (inProcess) {
    const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    comm->direct->oneHardwareQueue = connections && std::atoi(connections) == 1;
  }
  int64_t maxBlocks = 0;
  GYRE_CHECK(env::getInt("GYRE_DIRECT_BLOCKS", &maxBlocks));
  comm->direct->maxBlocks = static_cast<int32_t>(maxBlocks);
  GYRE_CHECK(allocateAbortWord(comm));
  if (inProcess) {
    GYRE_CHECK(leaderChoice(&comm->direct->leaderRunsAll));
    GYRE_CHECK(setupInProcess(comm, deadline));
    GYRE_INFO("INIT", "device collectives of %zu bytes and more run direct: %d ranks of this process share this "
              "GPU", minBytes, comm->nranks);
    return ncclSuccess;
  }
  GYRE_CHECK(setupAcrossProcesses(comm, deadline));
  // Stream waits on flags can wait forever on a peer process; events of
  // ranks of one process wait only on work already queued, so they need none.
  comm->direct->watchdog = std::thread([comm] { watchPeers(comm); });
  GYRE_INFO("INIT", "device collectives run direct: %d processes share this GPU through CUDA IPC%s", comm->nranks,
            comm->direct->leaderRunsAll ? "; rank 0 runs every rank's share" : "");
  return ncclSuccess;
}

size_t directInboxWords(int nranks) { return 2 * size_t(nranks) + capturedCallFlagWords(nranks); }

bool takesDirect(const DeviceRequest& c) {
  const DirectState* d = c.comm->direct.get();
  if (!d) return false;
  if (!d->clique) return true;  // processes sharing a GPU: every collective (some then staged, all agreeing)
  if (std::max(inputBytes(c), outputBytes(c)) < d->minBytes) return false;
  // Captured calls need a slot of flags (direct_inprocess.cc); the ranks
  // capture alike, so they count alike.
  bool capturing = false;
  if (deviceRuntime()->isCapturing(c.stream, &capturing) != ncclSuccess) return false;
  return !capturing || d->oneHardwareQueue || d->capturedCalls < kCapturedDirectCalls;
}

namespace {

static_assert(sizeof(CallInfo) <= ProcessMailbox::kRecordBytes, "a CallInfo must fit a mailbox record");

// Every rank's CallInfo of call `c` into `infos` (this rank's is in place):
// through the host's shared-memory mailbox (a few microseconds), else over
// the bootstrap ring (a TCP round trip per rank).
ncclResult_t gatherInfos(const DeviceRequest& c, std::vector<CallInfo>* infos) {
  DeviceComm* comm = c.comm;
  Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
  const CallInfo& mine = (*infos)[comm->rank];
  if (comm->copies && comm->copies->ipc && comm->copies->ipc->mailbox.recordsUsable()) {
    const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
    int missing = -1;
    if (comm->copies->ipc->mailbox.allGather(comm->rank, mine.callSeq - 1, infos->data(), sizeof(CallInfo), deadline,
                                             &comm->abortFlag, [&](int r) { return processGone(peers[r].pid); },
                                             &missing))
      return ncclSuccess;
    if (missing >= 0 && processGone(peers[missing].pid))
      return missedMeeting(c, ncclRemoteError, "rank " + std::to_string(missing) + " (pid " +
                           std::to_string(peers[missing].pid) + ") died", false);
    if (comm->abortFlag.load()) return missedMeeting(c, ncclInvalidUsage, "the communicator was aborted", false);
    return missedMeeting(c, ncclRemoteError, missing >= 0 ? "rank " + std::to_string(missing) + " never made it"
                                                          : "a peer has not collected this rank's earlier calls");
  }
  ncclResult_t r = comm->bootstrap->allGather(infos->data(), sizeof(CallInfo), deadline, &comm->abortFlag);
  return r == ncclSuccess ? ncclSuccess : missedMeeting(c, r, lastErrorText(), deadline.expired());
}

// Ranks of different processes: one call at a time, over the bootstrap ring
// and stream flags.
ncclResult_t launchAcrossProcesses(const DeviceRequest& c, std::vector<DeviceRequest>* staged) {
  DeviceComm* comm = c.comm;
  OnDevice onDevice;
  GYRE_CHECK(onDevice.enter(comm->cudaDev, comm->rank));
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
  std::vector<DirectCall> calls;
  ncclResult_t r = buildDirectCalls(c, infos, &calls);
  const uint32_t slot = infos[comm->rank].capturedSlot;
  if (r == ncclSuccess && slot) {
    r = enqueueCapturedCall(comm, calls, slot, c.stream, FlagRunner::kStreamMemOps);
    if (r == ncclSuccess) comm->direct->callsRun.fetch_add(1);
  } else if (r == ncclSuccess) {
    r = enqueueDirect(c, infos[comm->rank].callSeq, calls);
  }
  if (r != ncclSuccess) failAndRelease(comm, r, comm->rank);  // peers may already wait on this rank's signals
  else noteDirectRun(*comm->direct, infos[comm->rank]);
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
    releaseInProcess(comm);
  } else {
    if (!abort) {
      Deadline deadline = Deadline::afterSeconds(seconds);
      comm->bootstrap->barrier(deadline, &comm->abortFlag);
    }
    if (!d.inboxHost) freeAfterDeviceWork(DeferredFree::kDevice, d.inbox, comm->cudaDev);  // else the mailbox's
  }
  freeAfterDeviceWork(DeferredFree::kDevice, d.abortWord, comm->cudaDev);
  d.flagWatch.release();
  comm->direct.reset();
  return true;
}

}  // namespace gyre
