// ncclCommWindowRegister's collective part (window.h): the ranks agree on
// the window, exchange what maps it, and each publishes its LSA peers'
// addresses for the data paths (DeviceComm::windows) and for device code
// (the handle's ncclWindow_vidmem).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "include/nccl_device.h"
#include "src/comm/comm.h"
#include "src/comm/lsa_team.h"
#include "src/comm/window.h"
#include "src/debug/deadline.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/device_comm.h"
#include "src/device/runtime/ipc_registry.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

// Every live window of the process, for calls that take only a handle.
std::mutex& liveMutex() {
  static std::mutex* m = new std::mutex;
  return *m;
}
std::map<ncclWindow_t, WindowRecord*>& live() {
  static auto* m = new std::map<ncclWindow_t, WindowRecord*>;
  return *m;
}

// What each rank says about its window at registration.
struct WindowOffer {
  uint64_t size = 0;
  uint64_t buff = 0;
  int32_t flags = 0;
  int32_t pid = 0;
  uint8_t shareable = 0;       // `alloc` describes the buffer (CUDA IPC can map it)
  uint8_t signalsOffered = 0;  // this registration also sets up the signal slots
  uint8_t signalsShareable = 0;
  uint8_t pad[5] = {};
  SharedAllocation alloc;
  uint64_t allocOffset = 0;
  SharedAllocation signalAlloc;
  uint64_t signalOffset = 0;
  uint64_t signalPtr = 0;
};

// The ranks compare what they register so a mismatch fails at once on every
// rank, naming the rank, instead of at first use.
ncclResult_t checkAgreement(ncclComm* comm, const std::vector<WindowOffer>& all, const char* fn) {
  const WindowOffer& mine = all[comm->rank];
  for (int r = 0; r < comm->nranks; ++r) {
    const WindowOffer& o = all[r];
    if (o.flags != mine.flags)
      return fail(ncclInvalidUsage, "%s: rank %d registers its window with flags 0x%x, rank %d with 0x%x; every rank "
                                    "must pass the same winFlags", fn, r, o.flags, comm->rank, mine.flags);
    if ((mine.flags & NCCL_WIN_COLL_SYMMETRIC) && o.size != mine.size)
      return fail(ncclInvalidUsage, "%s: symmetric window of %llu bytes on rank %d but %llu bytes on rank %d; a "
                                    "symmetric window has the same size on every rank", fn,
                  static_cast<unsigned long long>(o.size), r, static_cast<unsigned long long>(mine.size), comm->rank);
    if (o.signalsOffered != mine.signalsOffered)
      return fail(ncclInternalError, "%s: rank %d and rank %d disagree on whether this is the communicator's first "
                                     "window", fn, r, comm->rank);
  }
  return ncclSuccess;
}

// Where rank r's bytes described by (buff, shareable, alloc, offset) are in
// this process: its own pointer within the process, a CUDA IPC mapping
// across processes (held in `held`), nullptr where neither works.
char* mapPeer(ncclComm* comm, int r, uint64_t buff, bool shareable, const SharedAllocation& alloc,
              uint64_t offset, std::set<uint64_t>* held, const char* fn) {
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  if (r == comm->rank || peers[r].pid == peers[comm->rank].pid) return reinterpret_cast<char*>(buff);
  if (!shareable) {
    GYRE_INFO("INIT", "%s: rank %d's buffer is not device memory CUDA IPC can share; its window is not "
                      "reachable from rank %d", fn, r, comm->rank);
    return nullptr;
  }
  void* base = nullptr;
  if (mapPeerAllocation(peers[r].pid, alloc, held, &base) != ncclSuccess) {
    GYRE_WARN("%s: rank %d cannot map rank %d's window by CUDA IPC (%s); it is not reachable", fn, comm->rank, r,
              lastErrorText());
    return nullptr;
  }
  return static_cast<char*>(base) + offset;
}

ncclResult_t setUpSignals(ncclComm* comm, const std::vector<WindowOffer>& all, const LsaTeam& team, const char* fn,
                          SignalArea* s) {
  s->atPeer.assign(comm->nranks, nullptr);
  s->sent.assign(comm->nranks, 0);
  s->expected.assign(comm->nranks, 0);
  for (int r = team.base; r < team.base + team.size; ++r) {
    const WindowOffer& o = all[r];
    char* area = mapPeer(comm, r, o.signalPtr, o.signalsShareable, o.signalAlloc, o.signalOffset, &s->heldBlocks, fn);
    if (area) s->atPeer[r] = reinterpret_cast<uint32_t*>(area) + comm->rank;
  }
  return ncclSuccess;
}

void freeSignals(SignalArea* s) {
  releasePeerBlocks(&s->heldBlocks);
  if (s->mine) deviceRuntime()->deviceFree(s->mine);
  delete s;
}

// The device-readable ncclWindow_vidmem of `w` and its LSA table, in device
// memory on a device communicator (host memory on a host one).
ncclResult_t publishHandle(ncclComm* comm, WindowRecord* w) {
  const size_t bytes = sizeof(ncclWindow_vidmem) + sizeof(char*) * w->lsaSize;
  std::vector<char> image(bytes, 0);
  void* mem = nullptr;
  DeviceRuntime* rt = comm->isHost ? nullptr : deviceRuntime();
  if (rt) {
    GYRE_CHECK(rt->deviceAlloc(bytes, &mem));
  } else {
    mem = calloc(1, bytes);
    if (!mem) return fail(ncclSystemError, "ncclCommWindowRegister: out of host memory (%zu bytes)", bytes);
  }
  auto* v = reinterpret_cast<ncclWindow_vidmem*>(image.data());
  v->magic = kWindowMagic;
  v->userPtr = static_cast<char*>(w->buff);
  v->size = w->size;
  v->worldRank = comm->rank;
  v->nRanks = comm->nranks;
  v->lsaRank = comm->rank - w->lsaBase;
  v->lsaSize = w->lsaSize;
  v->lsaWorldBase = w->lsaBase;
  v->winFlags = static_cast<uint32_t>(w->flags);
  v->lsaBases = reinterpret_cast<char* const*>(static_cast<char*>(mem) + sizeof(ncclWindow_vidmem));
  v->hostRecord = w;
  auto* table = reinterpret_cast<char**>(image.data() + sizeof(ncclWindow_vidmem));
  for (int i = 0; i < w->lsaSize; ++i) table[i] = w->peerBases[w->lsaBase + i];
  if (rt) {
    ncclResult_t r = rt->copySync(mem, image.data(), bytes);
    if (r != ncclSuccess) {
      rt->deviceFree(mem);
      return r;
    }
  } else {
    memcpy(mem, image.data(), bytes);
  }
  w->handle = static_cast<ncclWindow_t>(mem);
  w->handleOnDevice = rt != nullptr;
  return ncclSuccess;
}

}  // namespace

ncclResult_t registerWindow(ncclComm* comm, void* buff, size_t size, int flags, const char* fn, void* ownedMemory,
                            WindowRecord** out) {
  *out = nullptr;
  DeviceRuntime* rt = comm->isHost ? nullptr : deviceRuntime();
  const LsaTeam team = lsaTeamOf(comm);
  // CUDA IPC handles only where a rank of the team is another process
  // (making one can fail for memory IPC cannot share, and costs a call).
  bool otherProcess = false;
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  for (int r = team.base; r < team.base + team.size; ++r) otherProcess |= peers[r].pid != peers[comm->rank].pid;
  WindowOffer mine;
  mine.size = size;
  mine.buff = reinterpret_cast<uintptr_t>(buff);
  mine.flags = flags;
  mine.pid = static_cast<int32_t>(getpid());
  if (rt && buff && otherProcess) mine.shareable = describeOwnAllocation(buff, size, &mine.alloc, &mine.allocOffset);
  // The first window of a device communicator also sets up its signal slots
  // (every rank registers the same windows in the same order, so all agree).
  SignalArea* signals = nullptr;
  if (rt && !comm->signals) {
    signals = new SignalArea;
    void* area = nullptr;
    const size_t bytes = sizeof(uint32_t) * comm->nranks;
    ncclResult_t r = rt->deviceAlloc(bytes, &area);
    if (r == ncclSuccess) r = rt->memsetSync(area, 0, bytes);
    if (r != ncclSuccess) {
      if (area) rt->deviceFree(area);
      delete signals;
      return r;
    }
    signals->mine = static_cast<uint32_t*>(area);
    mine.signalsOffered = 1;
    mine.signalPtr = reinterpret_cast<uintptr_t>(area);
    if (otherProcess)
      mine.signalsShareable = describeOwnAllocation(area, bytes, &mine.signalAlloc, &mine.signalOffset);
  }
  std::vector<WindowOffer> all(comm->nranks);
  all[comm->rank] = mine;
  ncclResult_t res = ncclSuccess;
  if (comm->nranks > 1) {
    Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
    res = comm->bootstrap->allGather(all.data(), sizeof(WindowOffer), deadline, &comm->abortFlag);
  }
  if (res == ncclSuccess) res = checkAgreement(comm, all, fn);
  if (res != ncclSuccess) {
    if (signals) freeSignals(signals);
    return res;
  }
  if (signals) {
    setUpSignals(comm, all, team, fn, signals);
    comm->signals = signals;
  }
  auto* w = new WindowRecord;
  w->comm = comm;
  w->buff = buff;
  w->size = size;
  w->flags = flags;
  w->serial = ++comm->windowSerial;
  w->lsaBase = team.base;
  w->lsaSize = team.size;
  w->ownedMemory = ownedMemory;
  w->peerBases.assign(comm->nranks, nullptr);
  for (const WindowOffer& o : all) w->peerSizes.push_back(static_cast<size_t>(o.size));
  for (int r = team.base; r < team.base + team.size; ++r)
    w->peerBases[r] = mapPeer(comm, r, all[r].buff, all[r].shareable, all[r].alloc, all[r].allocOffset,
                              &w->heldBlocks, fn);
  res = publishHandle(comm, w);
  if (res != ncclSuccess) {
    releasePeerBlocks(&w->heldBlocks);
    delete w;
    return res;
  }
  if (comm->device)
    comm->device->windows.add(PeerWindow{w->serial, static_cast<char*>(buff), size, w->peerBases, w->peerSizes});
  {
    std::lock_guard<std::mutex> lock(comm->registrationMutex);
    comm->windows[w->handle] = w;
  }
  {
    std::lock_guard<std::mutex> lock(liveMutex());
    live()[w->handle] = w;
  }
  *out = w;
  return ncclSuccess;
}

void releaseWindow(ncclComm* comm, WindowRecord* w) {
  {
    std::lock_guard<std::mutex> lock(liveMutex());
    live().erase(w->handle);
  }
  if (comm->device) comm->device->windows.remove(w->serial);
  releasePeerBlocks(&w->heldBlocks);
  DeviceRuntime* rt = deviceRuntime();
  if (w->handleOnDevice)
    rt->deviceFree(w->handle);
  else
    free(w->handle);
  if (w->ownedMemory) rt->deviceFree(w->ownedMemory);
  delete w;
}

WindowRecord* windowOf(ncclComm* comm, ncclWindow_t win) {
  std::lock_guard<std::mutex> lock(comm->registrationMutex);
  auto it = comm->windows.find(win);
  return it == comm->windows.end() ? nullptr : it->second;
}

WindowRecord* anyWindow(ncclWindow_t win) {
  std::lock_guard<std::mutex> lock(liveMutex());
  auto it = live().find(win);
  return it == live().end() ? nullptr : it->second;
}

void releaseSignals(ncclComm* comm) {
  if (comm->signals) freeSignals(comm->signals);
  comm->signals = nullptr;
}

}  // namespace gyre
