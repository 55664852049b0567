// C API: NCCL's one-sided operations on windows (ncclPutSignal, ncclSignal,
// ncclWaitSignal) for peers in this rank's LSA team, with no SM involved but where noted: a
// put is a stream copy into the peer's window as mapped here (window.h),
// a signal a stream write of this rank's next signal count into the slot it
// owns in the peer's signal area, a wait a stream wait until the slot each
// peer owns here reaches the count expected. The counts are per (sender,
// receiver), and only the sender writes its slot, so signals need no atomic
// increment and none is lost; the wait compares wrap-safely. A wait on a
// rank of this process is a flag kernel instead of a stream wait, so it
// cannot hold a hardware queue the signaller's stream shares
// (src/device/signal_waits.h).
//
// Peers outside the LSA team (another node, no peer access) are refused:
// gyre has no network transport with remote writes. So are calls on a
// stream that captures a CUDA graph (refuseCapture says why).
#include "include/gyre.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/window.h"
#include "src/debug/error.h"
#include "src/device/runtime/runtime.h"
#include "src/device/signal_waits.h"
#include "src/enqueue/arg_checks.h"

using namespace gyre;

namespace {

ncclResult_t checkPeer(const ncclComm* comm, int peer, const char* fn) {
  if (peer < 0 || peer >= comm->nranks)
    return fail(ncclInvalidArgument, "%s: peer %d is outside 0..%d", fn, peer, comm->nranks - 1);
  return ncclSuccess;
}

// NCCL defines one signal and one context so far.
ncclResult_t checkSignalArgs(int sigIdx, int ctx, unsigned int flags, const char* fn) {
  if (sigIdx != 0 || ctx != 0 || flags != 0)
    return fail(ncclInvalidArgument, "%s: sigIdx %d, ctx %d and flags 0x%x must all be 0 (the values NCCL defines)",
                fn, sigIdx, ctx, flags);
  return ncclSuccess;
}

// The communicator's signal slots, or why one-sided operations cannot run.
ncclResult_t signalsOf(ncclComm* comm, const char* fn, SignalArea** out) {
  if (comm->isHost)
    return fail(ncclInvalidUsage, "%s: rank %d's communicator is a host-memory one; one-sided operations need a "
                                  "device communicator (its streams run them)", fn, comm->rank);
  if (!comm->signals)
    return fail(ncclInvalidUsage, "%s: rank %d has registered no window yet; ncclCommWindowRegister also sets up "
                                  "the signals one-sided operations use", fn, comm->rank);
  *out = comm->signals;
  return ncclSuccess;
}

ncclResult_t unreachable(ncclComm* comm, int peer, const char* fn, const char* what) {
  return fail(ncclInvalidUsage, "%s: rank %d's %s is not load/store accessible from rank %d (another node, or GPUs "
                                "without peer access); gyre's one-sided operations reach LSA peers only", fn, peer,
              what, comm->rank);
}

// Signals are counts that only grow, and a captured write or wait bakes its
// count into the graph: from the second replay on, the wait would pass before
// the peer's new signal and the put's data would race. So none is captured.
ncclResult_t refuseCapture(ncclComm* comm, cudaStream_t stream, const char* fn) {
  bool capturing = false;
  GYRE_CHECK(deviceRuntime()->isCapturing(stream, &capturing));
  if (capturing)
    return fail(ncclInvalidUsage, "%s: rank %d's stream is capturing a CUDA graph; one-sided signals are counts a "
                                  "replayed graph would repeat stale, so call it outside the capture", fn, comm->rank);
  return ncclSuccess;
}

// This rank's next signal to `peer`: a stream write of the new count.
ncclResult_t enqueueSignal(ncclComm* comm, SignalArea* s, int peer, cudaStream_t stream, const char* fn) {
  std::lock_guard<std::mutex> lock(s->mutex);
  if (!s->atPeer[peer]) return unreachable(comm, peer, fn, "signal area");
  GYRE_CHECK(deviceRuntime()->streamWriteFlag(stream, s->atPeer[peer], s->sent[peer] + 1));
  ++s->sent[peer];
  return ncclSuccess;
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
  WindowRecord* w = windowOf(comm, peerWin);
  if (!w)
    return fail(ncclInvalidArgument, "%s: peerWin %p is not a window registered on this communicator (rank %d)", fn,
                static_cast<void*>(peerWin), comm->rank);
  const size_t bytes = count * datatypeSize(datatype);
  const size_t peerSize = w->peerSizes[peer];  // what the peer registered
  if (peerWinOffset > peerSize || bytes > peerSize - peerWinOffset)
    return fail(ncclInvalidArgument, "%s: %zu bytes at offset %zu overrun rank %d's %zu-byte window", fn, bytes,
                peerWinOffset, peer, peerSize);
  GYRE_CHECK(checkSignalArgs(sigIdx, ctx, flags, fn));
  SignalArea* s = nullptr;
  GYRE_CHECK(signalsOf(comm, fn, &s));
  GYRE_CHECK(refuseCapture(comm, stream, fn));
  if (!w->peerBases[peer]) return unreachable(comm, peer, fn, "window");
  if (bytes > 0) GYRE_CHECK(deviceRuntime()->copyAsync(w->peerBases[peer] + peerWinOffset, localbuff, bytes, stream));
  return enqueueSignal(comm, s, peer, stream, fn);
}

GYRE_EXPORT ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                    cudaStream_t stream) {
  const char* fn = "ncclSignal";
  GYRE_CHECK(checkComm(comm, fn));
  GYRE_CHECK(checkPeer(comm, peer, fn));
  GYRE_CHECK(checkStream(comm, stream, fn));
  GYRE_CHECK(checkSignalArgs(sigIdx, ctx, flags, fn));
  SignalArea* s = nullptr;
  GYRE_CHECK(signalsOf(comm, fn, &s));
  GYRE_CHECK(refuseCapture(comm, stream, fn));
  return enqueueSignal(comm, s, peer, stream, fn);
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
    if (signalDescs[i].opCnt < 0)
      return fail(ncclInvalidArgument, "%s: signalDescs[%d].opCnt is %d (negative)", fn, i, signalDescs[i].opCnt);
    GYRE_CHECK(checkSignalArgs(signalDescs[i].sigIdx, signalDescs[i].ctx, 0, fn));
  }
  if (nDesc == 0) return ncclSuccess;
  SignalArea* s = nullptr;
  GYRE_CHECK(signalsOf(comm, fn, &s));
  GYRE_CHECK(refuseCapture(comm, stream, fn));
  std::lock_guard<std::mutex> lock(s->mutex);
  for (int i = 0; i < nDesc; ++i)
    if (!s->atPeer[signalDescs[i].peer]) return unreachable(comm, signalDescs[i].peer, fn, "signal area");
  const std::vector<PeerInfo>& peers = comm->bootstrap->peers();
  std::vector<SignalWait> waits;
  std::vector<uint32_t> expected = s->expected;
  for (int i = 0; i < nDesc; ++i) {
    const int peer = signalDescs[i].peer;
    expected[peer] += static_cast<uint32_t>(signalDescs[i].opCnt);
    waits.push_back(SignalWait{s->mine + peer, expected[peer], peer, peers[peer].pid == peers[comm->rank].pid});
  }
  GYRE_CHECK(enqueueSignalWaits(comm->device.get(), waits, stream));
  s->expected = expected;
  return ncclSuccess;
}
