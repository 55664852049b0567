// C API: ncclCommSuspend / ncclCommResume / ncclCommMemStats. A suspended
// communicator takes no calls (launch.cc refuses them naming the state) until
// it is resumed. What a suspend can release is what the communicator rebuilds
// on demand: the host AlltoAll's in-place copy. The device layer's FIFOs and
// staging buffers stay (they are set up once, at init), so a device
// communicator reports them as memory a suspend keeps.
#include <vector>

#include "include/gyre.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"

using namespace gyre;

GYRE_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  const char* fn = "ncclCommSuspend";
  GYRE_CHECK(checkComm(comm, fn));
  if (flags & ~NCCL_SUSPEND_MEM)
    return fail(ncclInvalidArgument, "%s: flags 0x%x has bits other than NCCL_SUSPEND_MEM (0x%x)", fn, flags,
                NCCL_SUSPEND_MEM);
  if (comm->activeCalls.load() > 0)
    return fail(ncclInvalidUsage, "%s: rank %d has %d call(s) in flight on this communicator; wait for them first", fn,
                comm->rank, comm->activeCalls.load());
  bool expected = false;
  if (!comm->suspended.compare_exchange_strong(expected, true))
    return fail(ncclInvalidUsage, "%s: the communicator (rank %d) is already suspended", fn, comm->rank);
  if (flags & NCCL_SUSPEND_MEM) std::vector<char>().swap(comm->alltoallCopy);
  GYRE_INFO("INIT", "%s: rank %d suspended (flags 0x%x)", fn, comm->rank, flags);
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  const char* fn = "ncclCommResume";
  GYRE_CHECK(checkComm(comm, fn));
  bool expected = true;
  if (!comm->suspended.compare_exchange_strong(expected, false))
    return fail(ncclInvalidUsage, "%s: the communicator (rank %d) is not suspended", fn, comm->rank);
  GYRE_INFO("INIT", "%s: rank %d resumed", fn, comm->rank);
  return ncclSuccess;
}

// Device memory of gyre's communicators is owned by the device layer, which
// keeps no per-communicator count; a host-memory communicator holds none.
GYRE_EXPORT ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  const char* fn = "ncclCommMemStats";
  GYRE_CHECK(checkComm(comm, fn));
  if (!value) return fail(ncclInvalidArgument, "%s: value is NULL", fn);
  switch (stat) {
    case ncclStatGpuMemSuspended: *value = comm->suspended.load() ? 1 : 0; return ncclSuccess;
    case ncclStatGpuMemSuspend:
    case ncclStatGpuMemPersist:
    case ncclStatGpuMemTotal:
      if (comm->isHost) {
        *value = 0;
        return ncclSuccess;
      }
      return fail(ncclInvalidUsage,
                  "%s: gyre does not count a device communicator's GPU memory (stat %d); only "
                  "ncclStatGpuMemSuspended is available", fn, static_cast<int>(stat));
  }
  return fail(ncclInvalidArgument, "%s: stat %d is not an ncclCommMemStat_t (0..3)", fn, static_cast<int>(stat));
}
