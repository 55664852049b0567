#include "src/device/kernel/kernel_calls.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/device/device_comm.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/call_scalar.h"
#include "src/device/launch_events.h"
#include "src/device/on_device.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"
#include "src/lower/lower.h"
#include "src/call/datatypes.h"
#include "src/sched/slot_meta.h"
#include "src/transport/transport.h"

namespace gyre {
namespace {

// Builds the call's lanes image (lane_images.h): the DeviceLane array
// followed by every lane's steps, addressed where the device copy will be.
ncclResult_t buildLanes(const DeviceRequest& c, KernelState::Lanes* out) {
  std::vector<LaneSpec> specs;
  GYRE_CHECK(collectiveLaneSpecs(*c.comm->wiring, c, &specs, &out->ll));
  size_t totalSteps = 0;
  for (const LaneSpec& s : specs) totalSteps += s.nsteps;
  const size_t lanesBytes = specs.size() * sizeof(DeviceLane);
  LaneImage& img = out->image;
  GYRE_CHECK(c.comm->kernels->arenas.carve(lanesBytes + totalSteps * sizeof(Step), &img));
  char* const image = static_cast<char*>(img.host);
  void* const device = img.device;
  size_t stepAt = lanesBytes;
  for (size_t i = 0; i < specs.size(); ++i) {
    const LaneSpec& s = specs[i];
    if (s.nsend > static_cast<size_t>(kMaxLaneConns) || s.nrecv > static_cast<size_t>(kMaxLaneConns))
      return fail(ncclInternalError, "%s: a lane uses %zu send and %zu receive connections; the kernel takes %d",
                  collName(c.coll), s.nsend, s.nrecv, kMaxLaneConns);
    DeviceLane lane{};
    lane.steps = reinterpret_cast<const Step*>(static_cast<char*>(device) + stepAt);
    lane.nsteps = static_cast<uint32_t>(s.nsteps);
    lane.channel = s.channel;
    out->channels.push_back(s.channel);
    lane.nsend = static_cast<uint8_t>(s.nsend);
    lane.nrecv = static_cast<uint8_t>(s.nrecv);
    std::vector<const void*>& conns = out->conns.emplace_back();
    for (size_t k = 0; k < s.nsend; ++k) {
      lane.send[k] = s.send[k]->fifo;
      lane.sendPeer[k] = s.send[k]->peer;
      conns.push_back(s.send[k]);
    }
    for (size_t k = 0; k < s.nrecv; ++k) {
      lane.recv[k] = s.recv[k]->fifo;
      lane.recvPeer[k] = s.recv[k]->peer;
      conns.push_back(s.recv[k]);
    }
    memcpy(image + i * sizeof(DeviceLane), &lane, sizeof(lane));
    // A lane the plan left without steps (a small call over several
    // channels) may have no step array: memcpy may not be given NULL even
    // for 0 bytes.
    if (s.nsteps) memcpy(image + stepAt, s.steps, s.nsteps * sizeof(Step));
    stepAt += s.nsteps * sizeof(Step);
  }
  out->count = static_cast<int>(specs.size());
  return ncclSuccess;
}

KernelState::Shape shapeOf(const DeviceRequest& c) {
  bool rooted = c.coll == CollKind::Broadcast || c.coll == CollKind::Reduce;
  // A per-call algorithm selection (nccl*Config) plans differently.
  return {static_cast<int>(c.coll), c.count, static_cast<int>(c.datatype), rooted ? c.root : -1,
          isInPlace(c, c.comm->rank), c.allowedAlgorithms, c.algorithmsRequired};
}

// The call's cached lanes (built on first use of its shape; launchRun
// queues their copy to the device).
ncclResult_t lanesFor(const DeviceRequest& c, KernelState::Lanes** out) {
  KernelState& k = *c.comm->kernels;
  const KernelState::Shape shape = shapeOf(c);
  std::lock_guard<std::mutex> lock(k.mutex);
  auto it = k.cache.find(shape);
  if (it == k.cache.end()) {
    KernelState::Lanes lanes;
    GYRE_CHECK(buildLanes(c, &lanes));
    it = k.cache.emplace(shape, std::move(lanes)).first;
  }
  *out = &it->second;  // map nodes stay put; entries live until destroy
  return ncclSuccess;
}

// Calls that share one launch, with their cached lanes (no allocation: a
// call outside a group is a run of one).
struct LaunchRun {
  std::array<const DeviceRequest*, kMaxFusedCalls> calls{};
  std::array<KernelState::Lanes*, kMaxFusedCalls> lanes{};
  size_t size = 0;
  bool full() const { return size == calls.size(); }
  void add(const DeviceRequest* c, KernelState::Lanes* l) {
    calls[size] = c;
    lanes[size] = l;
    ++size;
  }
  void dropLast() { --size; }
};

// The blocks of one launch carrying `run`'s calls (cached per list of shapes).
ncclResult_t fusedBlocksFor(const LaunchRun& run, KernelState::Blocks** out) {
  KernelState& k = *run.calls[0]->comm->kernels;
  std::vector<KernelState::Shape> key;
  for (size_t i = 0; i < run.size; ++i) key.push_back(shapeOf(*run.calls[i]));
  std::lock_guard<std::mutex> lock(k.mutex);
  auto it = k.fusedCache.find(key);
  if (it == k.fusedCache.end()) {
    std::vector<LaneConnections> conns;
    int widest = 0;
    for (size_t i = 0; i < run.size; ++i) {
      conns.push_back(run.lanes[i]->conns);
      widest = std::max(widest, run.lanes[i]->count);
    }
    // No more blocks than the widest call launches alone: fusing never asks
    // the GPU to hold more spinning blocks at once than one call does.
    FusedBlocks plan;
    KernelState::Blocks blocks;
    if (planFusedBlocks(conns, widest, &plan)) {
      const size_t firstBytes = plan.blockFirst.size() * sizeof(uint32_t);
      GYRE_CHECK(k.arenas.carve(firstBytes + plan.items.size() * sizeof(LaneRef), &blocks.image));
      char* image = static_cast<char*>(blocks.image.host);
      memcpy(image, plan.blockFirst.data(), firstBytes);
      memcpy(image + firstBytes, plan.items.data(), plan.items.size() * sizeof(LaneRef));
      void* device = blocks.image.device;
      blocks.ok = true;
      blocks.nblocks = plan.nblocks();
      blocks.blockFirst = static_cast<const uint32_t*>(device);
      blocks.items = reinterpret_cast<const LaneRef*>(static_cast<char*>(device) + firstBytes);
    }
    it = k.fusedCache.emplace(std::move(key), blocks).first;
  }
  *out = &it->second;  // map nodes stay put
  return ncclSuccess;
}

// Whether `b` may join a launch that starts with `a`: one kernel
// instantiation (type, operator) on one stream of one communicator.
bool sameLaunch(const DeviceRequest& a, const DeviceRequest& b) {
  return a.comm == b.comm && a.stream == b.stream && a.datatype == b.datatype && a.op == b.op;
}

DeviceCall describeCall(const DeviceRequest& c, const KernelState::Lanes& lanes) {
  GYRE_TRACE("COLL", "%s #%llu count %zu %s %s: %d lanes, %s", collName(c.coll),
             static_cast<unsigned long long>(c.comm->opCount + 1), c.count, datatypeName(c.datatype),
             redOpName(c.op), lanes.count, lanes.ll ? "LL" : "Simple");
  DeviceComm* comm = c.comm;
  DeviceCall d{};
  d.lanes = static_cast<const DeviceLane*>(lanes.image.device);
  d.nlanes = lanes.count;
  d.coll = static_cast<uint8_t>(c.coll);
  d.datatype = static_cast<uint8_t>(c.datatype);
  d.redop = static_cast<uint8_t>(c.op);
  d.metaRedop = static_cast<uint8_t>(c.op < ncclNumOps ? c.op : 0xff);
  d.ll = lanes.ll ? 1 : 0;
  d.buffers[kInputBuffer] = const_cast<void*>(c.input);
  d.buffers[kOutputBuffer] = c.output;
  d.count = c.count;
  d.opCount = ++comm->opCount;
  d.root = metaRootOf(c.coll, c.root);
  d.nranks = comm->nranks;
  setCallScalar(c, &d);
  d.status = comm->kernels->statusDevice;
  d.peerGone = comm->kernels->peerGoneDevice;
  d.timeoutNs = static_cast<uint64_t>(comm->collTimeoutSeconds * 1e9);
  return d;
}

// Kernels of two communicators on one stream would run one after the other,
// and the first would wait forever for ranks whose kernel is queued behind it.
ncclResult_t checkStreams(const std::vector<DeviceRequest>& calls) {
  for (size_t i = 0; i < calls.size(); ++i)
    for (size_t j = i + 1; j < calls.size(); ++j)
      if (calls[i].stream == calls[j].stream && calls[i].comm != calls[j].comm &&
          calls[i].comm->bootstrap->secret() == calls[j].comm->bootstrap->secret())
        return fail(ncclInvalidUsage, "%s: ranks %d and %d of one communicator are driven on the same stream in one "
                    "group; their kernels would wait for each other forever. Give each rank its own stream",
                    collName(calls[j].coll), calls[i].comm->rank, calls[j].comm->rank);
  return ncclSuccess;
}

// Kernels of different processes on one GPU do not run at the same time
// without MPS: the GPU time-slices between their contexts, so kernels that
// spin waiting for each other would advance one time slice per step.
bool sharesGpuWithAnotherProcess(const DeviceComm* comm) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const PeerInfo& self = peers[comm->rank];
  for (const PeerInfo& p : peers)
    if (p.hostHash == self.hostHash && p.busId == self.busId && p.pid != self.pid) return true;
  return false;
}

// CUDA_LAUNCH_BLOCKING=1 makes each launch wait for its kernel, so the
// kernels of ranks driven from one process could never run together: the
// first would spin for a peer whose kernel is launched only after it ends.
bool launchesSerializedWithPeers(const DeviceComm* comm) {
  const char* blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (!blocking || std::string(blocking) != "1") return false;
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  for (int r = 0; r < comm->nranks; ++r)
    if (r != comm->rank && peers[r].hostHash == peers[comm->rank].hostHash && peers[r].pid == peers[comm->rank].pid)
      return true;
  return false;
}

const char* describeKind(int32_t kind) {
  switch (kind) {
    case kDeviceAborted: return "aborted";
    case kDeviceTimeout: return "timeout";
    case kDevicePeerGone: return "peer gone";
    default: return "mismatch";
  }
}

// The call a failed lane was in, as its SlotMeta would say it.
SlotMeta ownCall(const DeviceStatus& st) {
  SlotMeta m{};
  m.opCount = static_cast<uint32_t>(st.opCount);
  m.root = st.root;
  m.count = st.count;
  m.coll = st.coll;
  m.datatype = st.datatype;
  m.redop = st.redop;
  return m;
}

}  // namespace

ncclResult_t chooseDeviceExecutor(DeviceComm* comm, bool p2pToEveryPeer, const Deadline& deadline) {
  std::string mode = env::getString("GYRE_DEVICE_PATH");
  if (mode.empty()) mode = "auto";
  DeviceRuntime* rt = deviceRuntime();
  // Per rank: {every edge may be p2p, shares its GPU with another process,
  // launches serialized with a rank of its own process}.
  std::vector<std::array<int32_t, 3>> facts(comm->nranks, {0, 0, 0});
  facts[comm->rank] = {mode != "staged" && rt && p2pToEveryPeer ? 1 : 0, sharesGpuWithAnotherProcess(comm) ? 1 : 0,
                       launchesSerializedWithPeers(comm) ? 1 : 0};
  GYRE_CHECK(comm->bootstrap->allGather(facts.data(), sizeof(facts[0]), deadline, &comm->abortFlag));
  std::vector<int32_t> able(comm->nranks);
  bool timeSliced = false, serialized = false;
  for (int r = 0; r < comm->nranks; ++r) {
    able[r] = facts[r][0];
    timeSliced |= facts[r][1] != 0;
    serialized |= facts[r][2] != 0;
  }
  // Processes sharing a GPU: setupDirect maps their buffers; what it cannot
  // run is staged. Ranks of one process go on as under auto (kernels for
  // what the direct path does not take).
  if (mode == "direct" && timeSliced) return ncclSuccess;
  if (serialized) {
    if (mode == "kernels")
      return fail(ncclInvalidUsage, "GYRE_DEVICE_PATH=kernels with CUDA_LAUNCH_BLOCKING=1: ranks driven from one "
                  "process would wait for each other's kernels forever; unset one of them");
    GYRE_INFO("INIT", "CUDA_LAUNCH_BLOCKING=1 with several ranks in one process: staging collectives through host "
                      "memory (kernels would wait for each other)");
    std::fill(able.begin(), able.end(), 0);
  }
  // Unmeasured: whether MPS makes kernels worth it there; forcing them is allowed.
  if (mode == "auto" && timeSliced) {
    GYRE_INFO("INIT", "ranks of different processes share a GPU: no collective kernels (without MPS they take "
                      "turns on the GPU; GYRE_DEVICE_PATH=kernels forces them); the direct executor takes them when "
                      "every rank is in its own process on this GPU, else they stage through host memory");
    std::fill(able.begin(), able.end(), 0);
  }
  auto unable = std::find(able.begin(), able.end(), 0);
  if (mode == "kernels" && unable != able.end())
    return fail(ncclInvalidUsage, "GYRE_DEVICE_PATH=kernels, but rank %d cannot reach every other rank over p2p "
                "(another host, NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, or GPUs without peer access); unset it to stage "
                "through host memory", static_cast<int>(unable - able.begin()));
  comm->deviceKernels = unable == able.end();
  GYRE_INFO("INIT", "device collectives run as %s", comm->deviceKernels ? "kernels over p2p connections"
                                                                        : "staged copies through host memory");
  if (!comm->deviceKernels) return ncclSuccess;
  comm->kernels = std::make_unique<KernelState>();
  void* host = nullptr;
  void* device = nullptr;
  const size_t statusBytes = (sizeof(DeviceStatus) + 15) & ~size_t{15};
  GYRE_CHECK(rt->allocMapped(statusBytes + sizeof(uint32_t) * comm->nranks, &host, &device));
  comm->kernels->statusHost = static_cast<DeviceStatus*>(host);
  comm->kernels->statusDevice = static_cast<DeviceStatus*>(device);
  comm->kernels->peerGoneHost = reinterpret_cast<uint32_t*>(static_cast<char*>(host) + statusBytes);
  comm->kernels->peerGoneDevice = reinterpret_cast<const uint32_t*>(static_cast<char*>(device) + statusBytes);
  LaneImage first;  // the arenas' first chunks, now rather than inside a call
  GYRE_CHECK(comm->kernels->arenas.carve(0, &first));
  return ncclSuccess;
}

void startKernelWatchdog(DeviceComm* comm) {
  if (comm->kernels) comm->kernels->watchdog.start(comm);
}

namespace {

// A launch's profiler events (launch_events.h): KernelLaunch around the
// launch call, a Coll event per call, a KernelCh event per lane until the
// kernel is done.
void beginLaunchEvents(const LaunchRun& run, const DeviceLaunch& launch, LaunchEvents* events) {
  CommObserver* o = run.calls[0]->comm->observer;
  events->begin(o, run.calls[0]->stream);
  for (size_t i = 0; i < run.size; ++i) {
    const KernelState::Lanes& lanes = *run.lanes[i];
    // The kernel's lanes come cached per call shape, without the plan's name.
    void* coll = startDeviceCallEvent(*run.calls[i], launch.calls[i].opCount, lanes.count, "unknown",
                                      lanes.ll ? "LL" : "Simple");
    events->addChannels(o, coll, lanes.channels.data(), static_cast<int>(lanes.channels.size()));
  }
}

// The copies of the images the launch reads, queued ahead of it (lane_images.h).
ncclResult_t queueImages(const LaunchRun& run, KernelState::Blocks* blocks, bool capturing,
                         std::vector<LaneImage*>* queued) {
  std::lock_guard<std::mutex> lock(run.calls[0]->comm->kernels->mutex);
  std::array<LaneImage*, kMaxFusedCalls + 1> images{};
  size_t n = 0;
  for (size_t i = 0; i < run.size; ++i) images[n++] = &run.lanes[i]->image;
  if (run.size > 1) images[n++] = &blocks->image;
  for (size_t i = 0; i < n; ++i) {
    bool mine = false;
    GYRE_CHECK(queueImageCopy(*images[i], run.calls[0]->stream, capturing, &mine));
    if (mine) queued->push_back(images[i]);
  }
  return ncclSuccess;
}

// Launches the run's calls as one kernel; `blocks` when there are several.
ncclResult_t launchRun(const LaunchRun& run, KernelState::Blocks* blocks) {
  const DeviceRequest& lead = *run.calls[0];
  DeviceLaunch launch{};
  launch.ncalls = static_cast<int32_t>(run.size);
  for (size_t i = 0; i < run.size; ++i) launch.calls[i] = describeCall(*run.calls[i], *run.lanes[i]);
  if (launch.ncalls == 1) {
    launch.nblocks = launch.calls[0].nlanes;
  } else {
    launch.nblocks = blocks->nblocks;
    launch.blockFirst = blocks->blockFirst;
    launch.items = blocks->items;
    GYRE_TRACE("COLL", "one kernel of %d blocks carries %d calls", launch.nblocks, launch.ncalls);
  }
  // A launch captured into a graph runs later, when the graph does: it is
  // ordered by the graph's launches, and destroy cannot wait for it (as with
  // NCCL: destroy after the graph's last run). A capturing stream also may
  // not wait for an event recorded outside the capture.
  bool capturing = false;
  GYRE_CHECK(deviceRuntime()->isCapturing(lead.stream, &capturing));
  StreamCompletions& order = lead.comm->kernels->lastLaunch;
  if (!capturing) GYRE_CHECK(order.followLast(lead.stream));
  std::vector<LaneImage*> queued;
  GYRE_CHECK(queueImages(run, blocks, capturing, &queued));
  // Profiler events; none for a captured launch, which runs at each replay.
  LaunchEvents events;
  if (!capturing && observedDeviceCalls(lead.comm)) beginLaunchEvents(run, launch, &events);
  const ncclResult_t launched = deviceRuntime()->launchKernel(launch, lead.stream);
  events.launched(launched == ncclSuccess ? lead.stream : nullptr);
  GYRE_CHECK(launched);
  if (!capturing) GYRE_CHECK(order.note(lead.stream));
  KernelState& k = *lead.comm->kernels;
  {
    // Later launches follow this one, so its copies serve them too.
    std::lock_guard<std::mutex> lock(k.mutex);
    for (LaneImage* image : queued) image->queuedEagerly = true;
  }
  const DeviceCall& last = launch.calls[launch.ncalls - 1];
  k.lastColl.store(last.coll, std::memory_order_relaxed);
  k.lastOpCount.store(last.opCount, std::memory_order_relaxed);
  k.lastCount.store(last.count, std::memory_order_relaxed);
  return ncclSuccess;
}

}  // namespace

ncclResult_t launchKernelCalls(const std::vector<DeviceRequest>& calls) {
  GYRE_CHECK(checkStreams(calls));
  DeviceRuntime* rt = deviceRuntime();
  // Every call's lanes are built before the first launch: building plans
  // the call, and no kernel of this group should wait for that.
  std::vector<KernelState::Lanes*> lanesOf(calls.size(), nullptr);
  for (size_t i = 0; i < calls.size(); ++i) {
    const DeviceRequest& c = calls[i];
    if (c.count == 0 || (c.comm->nranks == 1 && c.op < ncclNumOps)) continue;
    OnDevice onDevice;  // the lanes are carved on the communicator's GPU
    GYRE_CHECK(onDevice.enter(c.comm->cudaDev, c.comm->rank));
    GYRE_CHECK(lanesFor(c, &lanesOf[i]));
  }
  size_t i = 0;
  while (i < calls.size()) {
    const DeviceRequest& c = calls[i];
    if (c.count == 0) {
      ++i;
      continue;
    }
    // The launch, its events and any arena growth on the communicator's GPU.
    OnDevice onDevice;
    GYRE_CHECK(onDevice.enter(c.comm->cudaDev, c.comm->rank));
    if (c.comm->nranks == 1 && c.op < ncclNumOps) {
      // One rank: every collective is its input (avg divides by 1), so a
      // copy engine does it, as in NCCL; in place there is nothing to do.
      ++c.comm->opCount;
      if (observedEagerCall(c)) startDeviceCallEvent(c, c.comm->opCount, 1, kOneRankCopyAlgo, "Simple");
      if (c.input != c.output) {
        GYRE_CHECK(rt->copyAsync(c.output, c.input, c.count * datatypeSize(c.datatype), c.stream));
        // Noted like a kernel so destroy waits for the copy too (a copy
        // captured into a graph runs when the graph does, as kernels do).
        bool capturing = false;
        GYRE_CHECK(rt->isCapturing(c.stream, &capturing));
        if (!capturing) GYRE_CHECK(c.comm->kernels->lastLaunch.note(c.stream));
      }
      ++i;
      continue;
    }
    // The longest run of following calls that can share this call's launch
    // (calls of zero elements in between have nothing to run).
    LaunchRun run;
    run.add(&c, lanesOf[i]);
    KernelState::Blocks* blocks = nullptr;
    size_t end = i + 1;
    for (size_t j = i + 1; j < calls.size() && !run.full(); ++j) {
      if (calls[j].count == 0) continue;
      if (!lanesOf[j] || !sameLaunch(c, calls[j])) break;
      run.add(&calls[j], lanesOf[j]);
      KernelState::Blocks* wider = nullptr;
      GYRE_CHECK(fusedBlocksFor(run, &wider));
      if (!wider->ok) {
        run.dropLast();  // calls[j] starts the next launch
        break;
      }
      blocks = wider;
      end = j + 1;
    }
    GYRE_CHECK(launchRun(run, blocks));
    i = end;
  }
  return ncclSuccess;
}

ncclResult_t pollKernelStatus(DeviceComm* comm, bool queryStreams) {
  if (!comm->kernels || !comm->kernels->statusHost) return ncclSuccess;
  if (queryStreams) checkDeviceFault(comm);
  const DeviceStatus& st = *comm->kernels->statusHost;
  int32_t kind = __atomic_load_n(&st.error, __ATOMIC_ACQUIRE);
  if (kind == kDeviceOk) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(comm->kernels->mutex);
    if (comm->kernels->errorReported) return static_cast<ncclResult_t>(comm->asyncError.load());
    comm->kernels->errorReported = true;
  }
  const PeerInfo& p = comm->bootstrap->peers()[st.peer];
  const char* coll = collName(static_cast<CollKind>(st.coll));
  const auto op = static_cast<unsigned long long>(st.opCount);
  ncclResult_t r;
  if (kind == kDeviceTimeout)
    r = fail(ncclRemoteError, "%s #%llu (channel %d, step %u): the kernel of rank %d waited %.0f s (GYRE_TIMEOUT) "
             "for %s rank %d (%s pid %d); it is stalled, dead, or not making the matching call", coll, op, st.channel,
             st.step + 1, comm->rank, comm->collTimeoutSeconds, st.waitingForData ? "data from" : "buffer space at",
             st.peer, p.host, p.pid);
  else if (kind == kDeviceAborted && st.deadPeer > 0 && st.deadPeer == st.noticeFrom)
    r = fail(ncclRemoteError, "%s #%llu (channel %d, step %u): rank %d reported its own failure (see that rank's "
             "error: a CUDA error or a failed call) while the kernel of rank %d waited for %s rank %d", coll, op,
             st.channel, st.step + 1, st.noticeFrom - 1, comm->rank, st.waitingForData ? "data from" : "buffer space at",
             st.peer);
  else if (kind == kDeviceAborted && st.deadPeer > 0 && st.noticeFrom > 0)
    r = fail(ncclRemoteError, "%s #%llu (channel %d, step %u): rank %d reported that rank %d failed or stopped "
             "responding (a mismatched call or a stalled peer; see that rank's error) while the kernel of rank %d "
             "waited for %s rank %d", coll, op, st.channel, st.step + 1, st.noticeFrom - 1, st.deadPeer - 1,
             comm->rank, st.waitingForData ? "data from" : "buffer space at", st.peer);
  else if (kind == kDevicePeerGone)
    r = fail(ncclRemoteError, "%s #%llu (channel %d, step %u): rank %d (%s pid %d) closed its connections (it died, "
             "aborted or left the communicator) while the kernel of rank %d waited for %s it", coll, op, st.channel,
             st.step + 1, st.peer, p.host, p.pid, comm->rank, st.waitingForData ? "data from" : "buffer space at");
  else if (kind == kDeviceAborted)
    r = fail(ncclInvalidUsage, "%s #%llu (channel %d, step %u): the communicator of rank %d was aborted "
             "(ncclCommAbort) while its kernel waited for rank %d", coll, op, st.channel, st.step + 1, comm->rank,
             st.peer);
  else
    r = failMismatchedCalls(st.peer, st.seen, comm->rank, ownCall(st));
  GYRE_WARN("collective kernel stopped (%s): %s", describeKind(kind), lastErrorText());
  announceKernelFailure(comm);
  comm->host->markFailed(r, st.deadPeer > 0 ? st.deadPeer - 1 : st.peer);
  return r;
}

void abortKernels(DeviceComm* comm) {
  if (!comm->kernels) return;
  // Atomic: the watchdog thread reads and sets the word too.
  __atomic_store_n(&comm->kernels->statusHost->abort, 1u, __ATOMIC_RELEASE);
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

bool drainKernels(DeviceComm* comm, bool abort, double seconds) {
  if (!comm->kernels) return true;
  KernelState& k = *comm->kernels;
  if (abort) abortKernels(comm);
  if (!k.lastLaunch.waitAll(seconds)) return false;
  k.watchdog.stop();  // its reads of the connections end before they close
  pollKernelStatus(comm);
  k.lastLaunch.destroy();
  k.arenas.release();
  freeAfterDeviceWork(DeferredFree::kMapped, k.statusHost, comm->cudaDev);
  comm->kernels.reset();
  return true;
}

}  // namespace gyre
