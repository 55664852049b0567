// C API: ncclMemAlloc/Free, gyre's host memory and streaming copy, buffer
// registration and memory windows
// (window.h; the collective exchange is window_exchange.cc). Registration is an
// optimisation hint in NCCL (zero-copy for registered buffers); gyre's staged
// device path copies anyway, so it keeps a record per communicator, checks
// arguments and handles, and frees what is left at destroy.
#include <unistd.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "include/nccl_device.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/window.h"
#include "src/debug/deadline.h"
#include "src/debug/error.h"
#include "src/debug/fork_guard.h"
#include "src/debug/log.h"
#include "src/device/runtime/runtime.h"
#include "src/enqueue/arg_checks.h"
#include "src/enqueue/enqueue.h"
#include "src/host/shareable_memory.h"
#include "src/host/streaming_copy.h"

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

// ncclMemAlloc's aligned pointers and the allocations holding them.
std::mutex& alignedMutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<void*, void*>& alignedAllocations() {
  static auto* m = new std::map<void*, void*>;
  return *m;
}

ncclResult_t checkRange(const char* fn, const void* buff, size_t size) {
  if (!buff && size > 0) return fail(ncclInvalidArgument, "%s: buff is NULL (size %zu)", fn, size);
  return ncclSuccess;
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  GYRE_CHECK(checkNotForkedChild("ncclMemAlloc"));
  if (!ptr) return fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  DeviceRuntime* rt = deviceRuntime();
  // No GPU here: the caller's communicators are host-memory ones, and
  // shareable host memory is what makes their transfers single-copy.
  if (!rt || !rt->hasDevice()) return allocShareable(size, ptr);
  // NCCL's ncclMemAlloc hands out whole VMM granules, so its buffers can be
  // registered as symmetric windows as they are; the runtime carves small
  // allocations at finer alignment, so align here.
  void* raw = nullptr;
  GYRE_CHECK(rt->deviceAlloc(size + NCCL_WIN_REQUIRED_ALIGNMENT - 1, &raw));
  const uintptr_t aligned = (reinterpret_cast<uintptr_t>(raw) + NCCL_WIN_REQUIRED_ALIGNMENT - 1) /
                            NCCL_WIN_REQUIRED_ALIGNMENT * NCCL_WIN_REQUIRED_ALIGNMENT;
  *ptr = reinterpret_cast<void*>(aligned);
  std::lock_guard<std::mutex> lock(alignedMutex());
  alignedAllocations()[*ptr] = raw;
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclMemFree(void* ptr) {
  // Host memory first: freeing it is safe in a forked child, which holds a
  // private copy of what it inherited (shareable_memory.cc).
  if (!ptr || freeShareable(ptr)) return ncclSuccess;
  GYRE_CHECK(checkNotForkedChild("ncclMemFree"));
  DeviceRuntime* rt = deviceRuntime();
  if (!rt) return fail(ncclInvalidArgument, "ncclMemFree: %p was not allocated by ncclMemAlloc", ptr);
  void* raw = nullptr;
  {
    std::lock_guard<std::mutex> lock(alignedMutex());
    auto it = alignedAllocations().find(ptr);
    if (it == alignedAllocations().end())
      return fail(ncclInvalidArgument, "ncclMemFree: %p was not allocated by ncclMemAlloc (or was freed already)",
                  ptr);
    raw = it->second;
    alignedAllocations().erase(it);
  }
  return rt->deviceFree(raw);
}

GYRE_EXPORT ncclResult_t gyreMemAllocHost(void** ptr, size_t size) {
  GYRE_CHECK(checkNotForkedChild("gyreMemAllocHost"));
  if (!ptr) return fail(ncclInvalidArgument, "gyreMemAllocHost: ptr is NULL");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  return allocShareable(size, ptr);
}

GYRE_EXPORT ncclResult_t gyreMemFreeHost(void* ptr) {
  // No fork check: a forked child frees its private copies (shareable_memory.cc).
  if (!ptr || freeShareable(ptr)) return ncclSuccess;
  return fail(ncclInvalidArgument, "gyreMemFreeHost: %p is not the start of a gyreMemAllocHost allocation", ptr);
}

GYRE_EXPORT ncclResult_t gyreMemcpyStreaming(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  if (!dst || !src)
    return fail(ncclInvalidArgument, "gyreMemcpyStreaming: %s is NULL (bytes %zu)", dst ? "src" : "dst", bytes);
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if (d < s + bytes && s < d + bytes)
    return fail(ncclInvalidArgument, "gyreMemcpyStreaming: dst %p and src %p overlap (bytes %zu)", dst, src, bytes);
  copyStreaming(dst, src, bytes);
  return ncclSuccess;
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

constexpr int kKnownWindowFlags = NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING | NCCL_WIN_GIN_ONLY;

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
  // Collective: inside a group it runs at ncclGroupEnd, which fills *win.
  return runOrDefer(comm, [=] {
    ScopedLogRank logRank(comm->rank);
    WindowRecord* w = nullptr;
    GYRE_CHECK(registerWindow(comm, buff, size, winFlags, fn, nullptr, &w));
    *win = w->handle;
    return ncclSuccess;
  });
}

GYRE_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  const char* fn = "ncclCommWindowDeregister";
  GYRE_CHECK(checkComm(comm, fn));
  if (comm->activeCalls.load() > 0)
    return fail(ncclInvalidUsage, "%s: rank %d has a call in flight that may use the window; deregister after it",
                fn, comm->rank);
  WindowRecord* w = nullptr;
  {
    std::lock_guard<std::mutex> lock(comm->registrationMutex);
    auto it = comm->windows.find(win);
    if (!win || it == comm->windows.end())
      return fail(ncclInvalidArgument, "%s: window %p was not registered on this communicator (rank %d)", fn,
                  static_cast<void*>(win), comm->rank);
    if (it->second->ownedMemory)
      return fail(ncclInvalidUsage, "%s: window %p is a device communicator's resource window (rank %d); "
                  "ncclDevCommDestroy releases it", fn, static_cast<void*>(win), comm->rank);
    w = it->second;
    comm->windows.erase(it);
  }
  releaseWindow(comm, w);
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  const char* fn = "ncclWinGetUserPtr";
  GYRE_CHECK(checkComm(comm, fn));
  if (!outUserPtr) return fail(ncclInvalidArgument, "%s: outUserPtr is NULL", fn);
  WindowRecord* w = windowOf(comm, win);
  if (!w)
    return fail(ncclInvalidArgument, "%s: window %p was not registered on this communicator (rank %d)", fn,
                static_cast<void*>(win), comm->rank);
  *outUserPtr = w->buff;
  return ncclSuccess;
}

namespace gyre {

void releaseRegistrations(ncclComm* comm) {
  std::map<ncclWindow_t, WindowRecord*> windows;
  {
    std::lock_guard<std::mutex> lock(comm->registrationMutex);
    for (void* r : comm->registrations) delete static_cast<Registration*>(r);
    comm->registrations.clear();
    windows.swap(comm->windows);
  }
  for (auto& [handle, w] : windows) releaseWindow(comm, w);
  releaseSignals(comm);
}

}  // namespace gyre

