// C API: the host side of NCCL's device API (nccl_device.h) for LSA teams.
// ncclDevCommCreate is collective: the ranks first agree that every one of
// them can serve the requirements (so all refuse together, naming the rank
// and what is missing, instead of some waiting for the others), then each
// allocates the communicator's resources — the LSA barriers' words and the
// buffers requested — and registers them as a window, which maps every
// peer's resources here exactly as a user's window.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "include/nccl_device.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/lsa_team.h"
#include "src/comm/window.h"
#include "src/config/env.h"
#include "src/debug/deadline.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/runtime/runtime.h"
#include "src/enqueue/arg_checks.h"
#include "src/enqueue/enqueue.h"

using namespace gyre;

namespace {

constexpr size_t kResourceUnit = 16;  // a resource handle counts in these (ncclGetResourceBufferOffset)

// The requirements as the caller's release wrote them: fields past its
// `size` keep the initializer's values.
ncclResult_t readRequirements(const ncclDevCommRequirements_t* in, ncclDevCommRequirements_t* out, const char* fn) {
  *out = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  if (in->magic != NCCL_API_MAGIC)
    return fail(ncclInvalidArgument, "%s: reqs->magic is 0x%x, not NCCL_API_MAGIC: initialise the requirements "
                                     "with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER", fn, in->magic);
  const size_t minimum = offsetof(ncclDevCommRequirements_t, lsaBarrierCount) + sizeof(int);
  if (in->size < minimum)
    return fail(ncclInvalidArgument, "%s: reqs->size %zu is too small for any release's requirements (at least "
                                     "%zu)", fn, in->size, minimum);
  memcpy(static_cast<void*>(out), in, std::min(in->size, sizeof(*out)));
  out->size = sizeof(*out);
  return ncclSuccess;
}

// The first rank of `team` that is another process on this rank's GPU
// (-1: none). Without MPS the GPU runs one process's kernels at a time,
// taking turns in time slices, so device code that waits for such a peer
// (an LSA barrier, a signal) advances one time slice per wait, as the
// collective kernels would (src/device/kernel/kernel_calls.cc keeps those
// ranks off kernels for the same reason).
int otherProcessOnThisGpu(const ncclComm* comm, const LsaTeam& team) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  const PeerInfo& me = peers[comm->rank];
  for (int r = team.base; r < team.base + team.size; ++r)
    if (peers[r].hostHash == me.hostHash && peers[r].busId == me.busId && peers[r].pid != me.pid) return r;
  return -1;
}

// otherProcessOnThisGpu, unless GYRE_DEVICE_API_SHARED_GPU=1 says MPS runs
// those processes' kernels together.
int refusedSharer(const ncclComm* comm, const LsaTeam& team) {
  int64_t sharedGpu = 0;
  if (env::getInt("GYRE_DEVICE_API_SHARED_GPU", &sharedGpu) == ncclSuccess && sharedGpu != 0) return -1;
  return otherProcessOnThisGpu(comm, team);
}

// What this rank cannot provide of `r` ("" when it can provide all).
std::string missingOf(const ncclComm* comm, const ncclDevCommRequirements_t& r, const LsaTeam& team) {
  if (comm->isHost) return "a host-memory communicator has no GPU for device code";
  if (team.size != comm->nranks)
    return "not every rank is load/store accessible (" + team.whyNotWorld +
           "); gyre's device API covers LSA teams only and has no GIN (network) to reach the others";
  if (const int other = refusedSharer(comm, team); other >= 0)
    return "rank " + std::to_string(other) + " is another process on this rank's GPU (rank " +
           std::to_string(comm->rank) + "): without MPS their kernels take turns on the GPU and every LSA barrier "
           "between them waits for a time slice; run those ranks in one process, or under MPS set "
           "GYRE_DEVICE_API_SHARED_GPU=1";
  std::vector<std::string> gin;
  auto need = [&](bool cond, const char* what) {
    if (cond) gin.push_back(what);
  };
  need(r.ginForceEnable, "ginForceEnable");
  need(r.ginSignalCount > 0, "ginSignalCount");
  need(r.ginCounterCount > 0, "ginCounterCount");
  need(r.ginConnectionType != NCCL_GIN_CONNECTION_NONE, "ginConnectionType");
  need(r.railGinBarrierCount > 0, "railGinBarrierCount");
  need(r.worldGinBarrierCount > 0, "worldGinBarrierCount");
  need(r.barrierCount > 0, "barrierCount (ncclBarrierSession spans GIN)");
  for (const ncclDevResourceRequirements_t* q = r.resourceRequirementsList; q; q = q->next)
    need(q->ginSignalCount > 0 || q->ginCounterCount > 0, "GIN signals or counters in resourceRequirementsList");
  if (!gin.empty()) {
    std::string s = "GIN (network) device resources are requested, and gyre has no GIN:";
    for (const std::string& g : gin) s += " " + g;
    return s;
  }
  if (r.lsaMultimem) return "lsaMultimem is requested, and gyre has no multimem (NVLink SHARP)";
  for (const ncclTeamRequirements_t* t = r.teamRequirementsList; t; t = t->next)
    if (t->multimem) return "a team in teamRequirementsList asks for multimem, and gyre has no multimem";
  if (r.lsaBarrierCount < 0) return "lsaBarrierCount is negative";
  for (const ncclDevResourceRequirements_t* q = r.resourceRequirementsList; q; q = q->next)
    if (q->bufferAlign & (q->bufferAlign - 1)) return "a bufferAlign in resourceRequirementsList is not a power of two";
  return "";
}

// Every rank's verdict, so all refuse together; the error names the first
// rank that cannot serve the requirements.
ncclResult_t agreeOnRequirements(ncclComm* comm, const std::string& mine, const char* fn) {
  constexpr size_t kReason = 384;
  std::vector<char> all(kReason * comm->nranks, 0);
  snprintf(all.data() + kReason * comm->rank, kReason, "%s", mine.c_str());
  if (comm->nranks > 1 && !comm->isHost) {
    Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
    GYRE_CHECK(comm->bootstrap->allGather(all.data(), kReason, deadline, &comm->abortFlag));
  }
  for (int r = 0; r < comm->nranks; ++r) {
    const char* reason = all.data() + kReason * r;
    if (reason[0]) return fail(ncclInvalidUsage, "%s: rank %d cannot serve the requirements: %s", fn, r, reason);
  }
  return ncclSuccess;
}

uint32_t reciprocal32(int n) { return n > 0 ? static_cast<uint32_t>(0xFFFFFFFFu / static_cast<uint32_t>(n)) + 1 : 0; }

// ncclDevCommCreate's collective part (runs at ncclGroupEnd in a group).
ncclResult_t createDevComm(ncclComm* comm, const ncclDevCommRequirements_t& r, ncclDevComm_t* outDevComm) {
  const char* fn = "ncclDevCommCreate";
  ScopedLogRank logRank(comm->rank);
  const LsaTeam team = lsaTeamOf(comm);
  GYRE_CHECK(agreeOnRequirements(comm, missingOf(comm, r, team), fn));
  // NCCL's ncclDevComm has no handle for these (LL all-to-all buffers come
  // from ncclLLA2ACreateRequirement), and NCCL reserves nothing for them.
  if (r.lsaLLA2ABlockCount > 0 || r.lsaLLA2ASlotCount > 0)
    GYRE_INFO("INIT", "%s: lsaLLA2ABlockCount %d / lsaLLA2ASlotCount %d reserve nothing, as in NCCL: chain "
              "ncclLLA2ACreateRequirement's requirement into resourceRequirementsList", fn, r.lsaLLA2ABlockCount,
              r.lsaLLA2ASlotCount);

  // Resources, on every rank: the barriers' epoch words and inboxes
  // (nccl_device/lsa_barrier.h), then each requested buffer.
  const int nBarriers = r.lsaBarrierCount;
  size_t bytes = sizeof(uint32_t) * gyre_device::lsaBarrierWords(nBarriers, team.size);
  std::vector<std::pair<ncclDevResourceHandle_t*, size_t>> handles;
  for (const ncclDevResourceRequirements_t* q = r.resourceRequirementsList; q; q = q->next) {
    const size_t align = std::max<size_t>(kResourceUnit, q->bufferAlign);
    if (align % kResourceUnit != 0 || (align & (align - 1)) != 0)
      return fail(ncclInvalidArgument, "%s: bufferAlign %zu is not a power of two", fn, q->bufferAlign);
    bytes = (bytes + align - 1) / align * align;
    if (bytes / kResourceUnit > UINT32_MAX)
      return fail(ncclInvalidArgument, "%s: the requested resource buffers exceed %llu bytes", fn,
                  static_cast<unsigned long long>(UINT32_MAX) * kResourceUnit);
    handles.push_back({q->outBufferHandle, bytes / kResourceUnit});
    bytes += q->bufferSize;
  }
  bytes = std::max<size_t>(bytes, kResourceUnit);
  DeviceRuntime* rt = deviceRuntime();
  void* mem = nullptr;
  GYRE_CHECK(rt->deviceAlloc(bytes, &mem));
  ncclResult_t res = rt->memsetSync(mem, 0, bytes);
  WindowRecord* w = nullptr;
  if (res == ncclSuccess) res = registerWindow(comm, mem, bytes, 0, fn, mem, &w);
  if (res != ncclSuccess) {
    rt->deviceFree(mem);
    return res;
  }
  for (auto& [out, unit] : handles)
    if (out) *out = static_cast<ncclDevResourceHandle_t>(unit);

  ncclDevComm d;
  memset(static_cast<void*>(&d), 0, sizeof(d));
  d.magic = NCCL_API_MAGIC;
  d.version = NCCL_VERSION_CODE;
  d.rank = comm->rank;
  d.nRanks = comm->nranks;
  d.nRanks_rcp32 = reciprocal32(comm->nranks);
  d.lsaRank = comm->rank - team.base;
  d.lsaSize = team.size;
  d.lsaSize_rcp32 = reciprocal32(team.size);
  d.lsaWorldBase = team.base;
  d.resourceWindow = w->handle;
  d.lsaBarrier.bufHandle = 0;
  d.lsaBarrier.nBarriers = nBarriers;
  *outDevComm = d;
  GYRE_INFO("INIT", "%s: rank %d of %d, LSA team of %d, %d LSA barriers, %zu bytes of resources", fn, comm->rank,
            comm->nranks, team.size, nBarriers, bytes);
  return ncclSuccess;
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
                                           ncclDevComm_t* outDevComm) {
  const char* fn = "ncclDevCommCreate";
  GYRE_CHECK(checkComm(comm, fn));
  if (!reqs || !outDevComm)
    return fail(ncclInvalidArgument, "%s: reqs (%p) and outDevComm (%p) must not be NULL", fn,
                static_cast<const void*>(reqs), static_cast<void*>(outDevComm));
  ncclDevCommRequirements_t r;
  GYRE_CHECK(readRequirements(reqs, &r, fn));
  return runOrDefer(comm, [comm, r, outDevComm] { return createDevComm(comm, r, outDevComm); });
}

GYRE_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm_t* devComm) {
  const char* fn = "ncclDevCommDestroy";
  GYRE_CHECK(checkComm(comm, fn));
  if (!devComm) return fail(ncclInvalidArgument, "%s: devComm is NULL", fn);
  WindowRecord* w = nullptr;
  {
    std::lock_guard<std::mutex> lock(comm->registrationMutex);
    auto it = comm->windows.find(devComm->resourceWindow);
    if (it == comm->windows.end() || !it->second->ownedMemory)
      return fail(ncclInvalidArgument, "%s: devComm was not made by ncclDevCommCreate on this communicator (rank "
                                       "%d), or was destroyed already", fn, comm->rank);
    w = it->second;
    comm->windows.erase(it);
  }
  releaseWindow(comm, w);
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props) {
  const char* fn = "ncclCommQueryProperties";
  GYRE_CHECK(checkComm(comm, fn));
  if (!props) return fail(ncclInvalidArgument, "%s: props is NULL", fn);
  if (props->magic != NCCL_API_MAGIC || props->size < sizeof(ncclCommProperties_t))
    return fail(ncclInvalidArgument, "%s: props (magic 0x%x, size %zu) was not initialised with "
                                     "NCCL_COMM_PROPERTIES_INITIALIZER", fn, props->magic, props->size);
  const LsaTeam team = lsaTeamOf(comm);
  const bool wholeTeam = !comm->isHost && team.size == comm->nranks;
  props->rank = comm->rank;
  props->nRanks = comm->nranks;
  props->cudaDev = comm->cudaDev;
  props->nvmlDev = -1;  // gyre does not use NVML
  props->deviceApiSupport = wholeTeam && refusedSharer(comm, team) < 0;
  props->multimemSupport = false;
  props->ginType = NCCL_GIN_TYPE_NONE;
  props->nLsaTeams = comm->isHost ? 0 : (comm->nranks % team.size == 0 ? comm->nranks / team.size : 0);
  props->hostRmaSupport = wholeTeam;
  props->railedGinType = NCCL_GIN_TYPE_NONE;
  return ncclSuccess;
}

// Host-side views of windows and teams.

namespace {

ncclResult_t windowPointer(const char* fn, ncclWindow_t window, size_t offset, int worldPeer, void** outPtr) {
  if (!outPtr) return fail(ncclInvalidArgument, "%s: outPtr is NULL", fn);
  *outPtr = nullptr;
  WindowRecord* w = anyWindow(window);
  if (!w) return fail(ncclInvalidArgument, "%s: window %p is not a registered window", fn, static_cast<void*>(window));
  if (worldPeer < 0 || worldPeer >= static_cast<int>(w->peerBases.size()))
    return fail(ncclInvalidArgument, "%s: rank %d is outside the communicator's %zu ranks", fn, worldPeer,
                w->peerBases.size());
  if (offset > w->peerSizes[worldPeer])
    return fail(ncclInvalidArgument, "%s: offset %zu is past rank %d's %zu-byte window", fn, offset, worldPeer,
                w->peerSizes[worldPeer]);
  if (!w->peerBases[worldPeer])
    return fail(ncclInvalidUsage, "%s: rank %d's window is not load/store accessible from rank %d", fn, worldPeer,
                w->comm->rank);
  *outPtr = w->peerBases[worldPeer] + offset;
  return ncclSuccess;
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr) {
  const char* fn = "ncclGetLsaDevicePointer";
  WindowRecord* w = anyWindow(window);
  if (!w) return fail(ncclInvalidArgument, "%s: window %p is not a registered window", fn, static_cast<void*>(window));
  if (lsaRank < 0 || lsaRank >= w->lsaSize)
    return fail(ncclInvalidArgument, "%s: lsaRank %d is outside the LSA team of %d ranks", fn, lsaRank, w->lsaSize);
  return windowPointer(fn, window, offset, w->lsaBase + lsaRank, outPtr);
}

GYRE_EXPORT ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr) {
  return windowPointer("ncclGetPeerDevicePointer", window, offset, peer, outPtr);
}

GYRE_EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t comm) {
  if (checkComm(comm, "ncclTeamWorld") != ncclSuccess) return ncclTeam_t{0, -1, 1};
  return ncclTeam_t{comm->nranks, comm->rank, 1};
}

GYRE_EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t comm) {
  if (checkComm(comm, "ncclTeamLsa") != ncclSuccess) return ncclTeam_t{0, -1, 1};
  const LsaTeam team = lsaTeamOf(comm);
  return ncclTeam_t{team.size, comm->rank - team.base, 1};
}

// gyre has no multimem: NULL, and success, as NCCL answers where multimem
// is not supported (programs test the pointer).
GYRE_EXPORT ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr) {
  const char* fn = "ncclGetLsaMultimemDevicePointer";
  if (!outPtr) return fail(ncclInvalidArgument, "%s: outPtr is NULL", fn);
  *outPtr = nullptr;
  if (!anyWindow(window))
    return fail(ncclInvalidArgument, "%s: window %p is not a registered window", fn, static_cast<void*>(window));
  (void)offset;
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t,
                                                      void** outPtr) {
  const char* fn = "ncclGetMultimemDevicePointer";
  if (!outPtr) return fail(ncclInvalidArgument, "%s: outPtr is NULL", fn);
  *outPtr = nullptr;
  if (!anyWindow(window))
    return fail(ncclInvalidArgument, "%s: window %p is not a registered window", fn, static_cast<void*>(window));
  (void)offset;
  return ncclSuccess;
}

// The ranks holding this rank's LSA rank in every LSA team (LSA teams are
// blocks of equal size, so they are lsaSize apart).
GYRE_EXPORT ncclTeam_t ncclTeamRail(ncclComm_t comm) {
  if (checkComm(comm, "ncclTeamRail") != ncclSuccess) return ncclTeam_t{0, -1, 1};
  const LsaTeam team = lsaTeamOf(comm);
  if (team.size <= 0 || comm->nranks % team.size != 0) {
    fail(ncclInvalidUsage, "ncclTeamRail: rank %d's LSA team of %d ranks does not divide the %d ranks into rails",
         comm->rank, team.size, comm->nranks);
    return ncclTeam_t{0, -1, 1};
  }
  return ncclTeam_t{comm->nranks / team.size, comm->rank / team.size, team.size};
}

GYRE_EXPORT int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (checkComm(comm, "ncclTeamRankToWorld") != ncclSuccess) return -1;
  return comm->rank + (rank - team.rank) * team.stride;
}

GYRE_EXPORT int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (checkComm(comm, "ncclTeamRankToLsa") != ncclSuccess) return -1;
  const LsaTeam lsa = lsaTeamOf(comm);
  return comm->rank + (rank - team.rank) * team.stride - lsa.base;
}
