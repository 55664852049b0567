// C API: NCCL's one-sided operations (ncclPutSignal, ncclSignal,
// ncclWaitSignal). gyre refuses them: a put writes into a peer's window
// without the peer taking part, which needs the peer's window mapped here
// (CUDA IPC or a registered RDMA region) and a signal slot the peer's stream
// can wait on; gyre's transports move data only between two ranks that both
// post the transfer. The arguments are checked first, so a program learns of
// a wrong argument before it learns that the operation is missing.
#include "include/gyre.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/window.h"
#include "src/debug/error.h"
#include "src/enqueue/arg_checks.h"

using namespace gyre;

namespace {

ncclResult_t checkPeer(const ncclComm* comm, int peer, const char* fn) {
  if (peer < 0 || peer >= comm->nranks)
    return fail(ncclInvalidArgument, "%s: peer %d is outside 0..%d", fn, peer, comm->nranks - 1);
  return ncclSuccess;
}

ncclResult_t refuse(const char* fn) {
  return fail(ncclInvalidUsage,
              "%s: gyre does not implement NCCL's one-sided operations (ncclPutSignal, ncclSignal, ncclWaitSignal): "
              "its windows are not mapped by peers and its transports have no remote write with a signal; use "
              "ncclSend/ncclRecv", fn);
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                                       ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                       unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  const char* fn = "ncclPutSignal";
  GYRE_CHECK(checkComm(comm, fn));
  GYRE_CHECK(checkDatatype(datatype, fn));
  GYRE_CHECK(checkCount(count, datatypeSize(datatype), fn));
  GYRE_CHECK(checkPeer(comm, peer, fn));
  GYRE_CHECK(checkStream(comm, stream, fn));
  if (!localbuff && count > 0) return fail(ncclInvalidArgument, "%s: localbuff is NULL (count %zu)", fn, count);
  if (!isWindowOf(comm, peerWin))
    return fail(ncclInvalidArgument, "%s: peerWin %p is not a window registered on this communicator", fn,
                static_cast<void*>(peerWin));
  if (peerWinOffset > peerWin->size || count * datatypeSize(datatype) > peerWin->size - peerWinOffset)
    return fail(ncclInvalidArgument, "%s: %zu bytes at offset %zu overrun the %zu-byte window", fn,
                count * datatypeSize(datatype), peerWinOffset, peerWin->size);
  if (sigIdx < 0 || ctx < 0 || flags != 0)
    return fail(ncclInvalidArgument, "%s: sigIdx %d and ctx %d must be >= 0 and flags (0x%x) 0", fn, sigIdx, ctx,
                flags);
  return refuse(fn);
}

GYRE_EXPORT ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                    cudaStream_t stream) {
  const char* fn = "ncclSignal";
  GYRE_CHECK(checkComm(comm, fn));
  GYRE_CHECK(checkPeer(comm, peer, fn));
  GYRE_CHECK(checkStream(comm, stream, fn));
  if (sigIdx < 0 || ctx < 0 || flags != 0)
    return fail(ncclInvalidArgument, "%s: sigIdx %d and ctx %d must be >= 0 and flags (0x%x) 0", fn, sigIdx, ctx,
                flags);
  return refuse(fn);
}

GYRE_EXPORT ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                                        cudaStream_t stream) {
  const char* fn = "ncclWaitSignal";
  GYRE_CHECK(checkComm(comm, fn));
  GYRE_CHECK(checkStream(comm, stream, fn));
  if (nDesc < 0 || (nDesc > 0 && !signalDescs))
    return fail(ncclInvalidArgument, "%s: nDesc %d with signalDescs %p", fn, nDesc, static_cast<void*>(signalDescs));
  for (int i = 0; i < nDesc; ++i) {
    GYRE_CHECK(checkPeer(comm, signalDescs[i].peer, fn));
    if (signalDescs[i].opCnt < 0 || signalDescs[i].sigIdx < 0 || signalDescs[i].ctx < 0)
      return fail(ncclInvalidArgument, "%s: signalDescs[%d] has opCnt %d, sigIdx %d, ctx %d (none may be negative)",
                  fn, i, signalDescs[i].opCnt, signalDescs[i].sigIdx, signalDescs[i].ctx);
  }
  return refuse(fn);
}
