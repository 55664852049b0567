// C API: library information and communicator lifecycle.
#include "include/gyre.h"
#include "src/bootstrap/rendezvous.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/comm_init.h"
#include "src/comm/executor_binding.h"
#include "src/device/device_layer.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/fork_guard.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"

using namespace gyre;

// The NCCL API level whose every function libnccl.so.2 exports (not gyre's
// own release, which the NCCL_DEBUG=VERSION banner shows): programs compare
// it with NCCL_VERSION(...) to decide which calls they may make.
GYRE_EXPORT ncclResult_t ncclGetVersion(int* version) {
  if (!version) return fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

GYRE_EXPORT void ncclResetDebugInit(void) { resetLogSettings(); }

GYRE_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the gyre developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

// A communicator that failed asynchronously (a staged device collective runs
// on a stream's thread, not the caller's) reports that failure; otherwise the
// calling thread's last error.
GYRE_EXPORT const char* ncclGetLastError(ncclComm_t comm) {
  // In a forked child the parent's locks may be held by threads that are not
  // here: answer from this thread's own text (the fork, if nothing else).
  if (inForkedChild()) {
    if (!*threadErrorText()) checkNotForkedChild("gyre");
    return threadErrorText();
  }
  if (comm && comm->magic == kCommMagic && comm->asyncError.load() != ncclSuccess) {
    std::lock_guard<std::mutex> lock(comm->errorMutex);
    if (!comm->errorText.empty()) return comm->errorText.c_str();
  }
  return lastErrorText();
}

GYRE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  GYRE_CHECK(checkNotForkedChild("ncclGetUniqueId"));
  if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  GYRE_CHECK(env::validateAll());
  bool fixed = false;
  GYRE_CHECK(uniqueIdFromCommIdEnv(&fixed, uniqueId));
  if (fixed) return ncclSuccess;
  UniqueIdContents contents;
  GYRE_CHECK(startDetachedRoot(&contents));
  encodeUniqueId(contents, uniqueId);
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                                ncclConfig_t* config) {
  return initCommunicator(comm, nranks, commId, rank, config, /*isHost=*/false, "ncclCommInitRankConfig");
}

GYRE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return initCommunicator(comm, nranks, commId, rank, nullptr, /*isHost=*/false, "ncclCommInitRank");
}

GYRE_EXPORT ncclResult_t gyreCommInitRankHost(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                              ncclConfig_t* config) {
  return initCommunicator(comm, nranks, commId, rank, config, /*isHost=*/true, "gyreCommInitRankHost");
}

GYRE_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  GYRE_CHECK(checkComm(comm, "ncclCommFinalize"));
  return finalizeCommunicator(comm);
}

GYRE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  GYRE_CHECK(checkComm(comm, "ncclCommDestroy"));
  return destroyCommunicator(comm, /*abort=*/false);
}

GYRE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  GYRE_CHECK(checkComm(comm, "ncclCommAbort"));
  return destroyCommunicator(comm, /*abort=*/true);
}

GYRE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  GYRE_CHECK(checkComm(comm, "ncclCommGetAsyncError"));
  if (!asyncError) return fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
  pollDeviceStatus(comm->device.get());
  *asyncError = static_cast<ncclResult_t>(comm->asyncError.load());
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  GYRE_CHECK(checkComm(comm, "ncclCommCount"));
  if (!count) return fail(ncclInvalidArgument, "ncclCommCount: count is NULL");
  *count = comm->nranks;
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  GYRE_CHECK(checkComm(comm, "ncclCommCuDevice"));
  if (!device) return fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL");
  *device = comm->cudaDev;  // -1 for host-memory communicators
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  GYRE_CHECK(checkComm(comm, "ncclCommUserRank"));
  if (!rank) return fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL");
  *rank = comm->rank;
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t gyreCommIsHost(const ncclComm_t comm, int* isHost) {
  GYRE_CHECK(checkComm(comm, "gyreCommIsHost"));
  if (!isHost) return fail(ncclInvalidArgument, "gyreCommIsHost: isHost is NULL");
  *isHost = comm->isHost ? 1 : 0;
  return ncclSuccess;
}

// One communicator's collective timeout, so two communicators of one process
// (two torch process groups) can fail at different times. The executors keep
// their own copy of the value (read on their threads without the comm), so
// every copy changes here.
GYRE_EXPORT ncclResult_t gyreCommSetTimeout(ncclComm_t comm, double seconds) {
  GYRE_CHECK(checkComm(comm, "gyreCommSetTimeout"));
  if (!(seconds > 0 && seconds <= 86400))
    return fail(ncclInvalidArgument, "gyreCommSetTimeout: seconds=%g must be in (0, 86400]", seconds);
  setCollTimeout(comm, seconds);
  return ncclSuccess;
}
