// C API: ncclMemAlloc/Free, buffer registration and memory windows, and the
// device-side API entry points gyre does not offer. Registration is an
// optimisation hint in NCCL (zero-copy for registered buffers); gyre's staged
// device path copies anyway, so it keeps a record per communicator, checks
// arguments and handles, and frees what is left at destroy.
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "include/nccl_device.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/window.h"
#include "src/debug/deadline.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/runtime/runtime.h"
#include "src/enqueue/arg_checks.h"
#include "src/host/shareable_memory.h"

using namespace gyre;

namespace {

constexpr uint64_t kRegistrationMagic = 0x6779726572656731ull;  // "gyrereg1"

// What ncclCommRegister's handle points to.
struct Registration {
  uint64_t magic;
  ncclComm* comm;
  void* buff;
  size_t size;
};

ncclResult_t checkRange(const char* fn, const void* buff, size_t size) {
  if (!buff && size > 0) return fail(ncclInvalidArgument, "%s: buff is NULL (size %zu)", fn, size);
  return ncclSuccess;
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  DeviceRuntime* rt = deviceRuntime();
  // No GPU here: the caller's communicators are host-memory ones, and
  // shareable host memory is what makes their transfers single-copy.
  if (!rt || !rt->hasDevice()) return allocShareable(size, ptr);
  return rt->deviceAlloc(size, ptr);
}

GYRE_EXPORT ncclResult_t ncclMemFree(void* ptr) {
  if (!ptr || freeShareable(ptr)) return ncclSuccess;
  DeviceRuntime* rt = deviceRuntime();
  if (!rt) return fail(ncclInvalidArgument, "ncclMemFree: %p was not allocated by ncclMemAlloc", ptr);
  return rt->deviceFree(ptr);
}

GYRE_EXPORT ncclResult_t gyreMemAllocHost(void** ptr, size_t size) {
  if (!ptr) return fail(ncclInvalidArgument, "gyreMemAllocHost: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  return allocShareable(size, ptr);
}

GYRE_EXPORT ncclResult_t gyreMemFreeHost(void* ptr) {
  if (!ptr || freeShareable(ptr)) return ncclSuccess;
  return fail(ncclInvalidArgument, "gyreMemFreeHost: %p is not the start of a gyreMemAllocHost allocation", ptr);
}

GYRE_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  const char* fn = "ncclCommRegister";
  GYRE_CHECK(checkComm(comm, fn));
  if (!handle) return fail(ncclInvalidArgument, "%s: handle is NULL", fn);
  *handle = nullptr;
  GYRE_CHECK(checkRange(fn, buff, size));
  auto* reg = new Registration{kRegistrationMagic, comm, buff, size};
  std::lock_guard<std::mutex> lock(comm->registrationMutex);
  comm->registrations.insert(reg);
  *handle = reg;
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  const char* fn = "ncclCommDeregister";
  GYRE_CHECK(checkComm(comm, fn));
  std::lock_guard<std::mutex> lock(comm->registrationMutex);
  if (!handle || !comm->registrations.count(handle))
    return fail(ncclInvalidArgument, "%s: handle %p was not registered on this communicator (rank %d)", fn, handle,
                comm->rank);
  comm->registrations.erase(handle);
  delete static_cast<Registration*>(handle);
  return ncclSuccess;
}

namespace {

// What each rank says about its window at registration.
struct WindowOffer {
  uint64_t size;
  uint64_t buff;
  int32_t flags;
  int32_t pid;
};

constexpr int kKnownWindowFlags = NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING | NCCL_WIN_GIN_ONLY;

// Registration is collective, as NCCL's: the ranks compare what they register
// so a mismatch fails at once, naming the rank, instead of at first use.
ncclResult_t agreeOnWindow(ncclComm* comm, const WindowOffer& mine, const char* fn, std::vector<WindowOffer>* all) {
  all->assign(comm->nranks, WindowOffer{});
  (*all)[comm->rank] = mine;
  if (comm->nranks > 1) {
    Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
    GYRE_CHECK(comm->bootstrap->allGather(all->data(), sizeof(WindowOffer), deadline, &comm->abortFlag));
  }
  for (int r = 0; r < comm->nranks; ++r) {
    const WindowOffer& o = (*all)[r];
    if (o.flags != mine.flags)
      return fail(ncclInvalidUsage, "%s: rank %d registers its window with flags 0x%x, rank %d with 0x%x; every rank "
                                    "must pass the same winFlags", fn, r, o.flags, comm->rank, mine.flags);
    if ((mine.flags & NCCL_WIN_COLL_SYMMETRIC) && o.size != mine.size)
      return fail(ncclInvalidUsage, "%s: symmetric window of %llu bytes on rank %d but %llu bytes on rank %d; a "
                                    "symmetric window has the same size on every rank", fn,
                  static_cast<unsigned long long>(o.size), r, static_cast<unsigned long long>(mine.size), comm->rank);
  }
  return ncclSuccess;
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                int winFlags) {
  const char* fn = "ncclCommWindowRegister";
  GYRE_CHECK(checkComm(comm, fn));
  if (!win) return fail(ncclInvalidArgument, "%s: win is NULL", fn);
  *win = nullptr;
  GYRE_CHECK(checkRange(fn, buff, size));
  if (winFlags & ~kKnownWindowFlags)
    return fail(ncclInvalidArgument, "%s: winFlags 0x%x has bits other than NCCL_WIN_COLL_SYMMETRIC, "
                                     "NCCL_WIN_STRICT_ORDERING and NCCL_WIN_GIN_ONLY", fn, winFlags);
  if ((winFlags & NCCL_WIN_COLL_SYMMETRIC) && reinterpret_cast<uintptr_t>(buff) % NCCL_WIN_REQUIRED_ALIGNMENT != 0)
    return fail(ncclInvalidArgument, "%s: a symmetric window must start at a multiple of %d bytes (buff %p)", fn,
                NCCL_WIN_REQUIRED_ALIGNMENT, buff);
  ScopedLogRank logRank(comm->rank);
  WindowOffer mine{size, reinterpret_cast<uintptr_t>(buff), winFlags, static_cast<int32_t>(getpid())};
  std::vector<WindowOffer> all;
  GYRE_CHECK(agreeOnWindow(comm, mine, fn, &all));
  auto* w = new ncclWindow_vidmem{kWindowMagic, comm, buff, size, winFlags, {}};
  bool oneProcess = true;
  for (const WindowOffer& o : all) oneProcess = oneProcess && o.pid == mine.pid;
  if (oneProcess)
    for (const WindowOffer& o : all) w->peerBuffs.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(o.buff)));
  std::lock_guard<std::mutex> lock(comm->registrationMutex);
  comm->windows.insert(w);
  *win = w;
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  const char* fn = "ncclCommWindowDeregister";
  GYRE_CHECK(checkComm(comm, fn));
  if (comm->activeCalls.load() > 0)
    return fail(ncclInvalidUsage, "%s: rank %d has a call in flight that may use the window; deregister after it",
                fn, comm->rank);
  std::lock_guard<std::mutex> lock(comm->registrationMutex);
  if (!win || !comm->windows.count(win))
    return fail(ncclInvalidArgument, "%s: window %p was not registered on this communicator (rank %d)", fn,
                static_cast<void*>(win), comm->rank);
  comm->windows.erase(win);
  delete win;
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  const char* fn = "ncclWinGetUserPtr";
  GYRE_CHECK(checkComm(comm, fn));
  if (!outUserPtr) return fail(ncclInvalidArgument, "%s: outUserPtr is NULL", fn);
  if (!isWindowOf(comm, win))
    return fail(ncclInvalidArgument, "%s: window %p was not registered on this communicator (rank %d)", fn,
                static_cast<void*>(win), comm->rank);
  *outUserPtr = win->buff;
  return ncclSuccess;
}

namespace gyre {

bool isWindowOf(ncclComm* comm, ncclWindow_t win) {
  std::lock_guard<std::mutex> lock(comm->registrationMutex);
  return win && comm->windows.count(win) > 0;
}

void releaseRegistrations(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->registrationMutex);
  for (void* r : comm->registrations) delete static_cast<Registration*>(r);
  for (ncclWindow_t w : comm->windows) delete w;
  comm->registrations.clear();
  comm->windows.clear();
}

}  // namespace gyre

GYRE_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements*,
                                           struct ncclDevComm*) {
  GYRE_CHECK(checkComm(comm, "ncclDevCommCreate"));
  return fail(ncclInvalidUsage, "ncclDevCommCreate: gyre does not offer NCCL's device-side API (ncclDevComm); "
                                "use the host API collectives");
}

GYRE_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm*) {
  GYRE_CHECK(checkComm(comm, "ncclDevCommDestroy"));
  return fail(ncclInvalidUsage, "ncclDevCommDestroy: gyre does not offer NCCL's device-side API (ncclDevComm)");
}

GYRE_EXPORT ncclResult_t ncclCommQueryProperties(ncclComm_t comm, struct ncclCommProperties* props) {
  const char* fn = "ncclCommQueryProperties";
  GYRE_CHECK(checkComm(comm, fn));
  if (!props) return fail(ncclInvalidArgument, "%s: props is NULL", fn);
  if (props->magic != NCCL_API_MAGIC || props->size < sizeof(ncclCommProperties_t))
    return fail(ncclInvalidArgument, "%s: props (magic 0x%x, size %zu) was not initialised with "
                                     "NCCL_COMM_PROPERTIES_INITIALIZER", fn, props->magic, props->size);
  props->rank = comm->rank;
  props->nRanks = comm->nranks;
  props->cudaDev = comm->cudaDev;
  props->nvmlDev = -1;  // gyre does not use NVML
  props->deviceApiSupport = false;
  props->multimemSupport = false;
  props->ginType = NCCL_GIN_TYPE_NONE;
  props->nLsaTeams = 0;
  props->hostRmaSupport = false;
  props->railedGinType = NCCL_GIN_TYPE_NONE;
  return ncclSuccess;
}
