#include "src/device/signal_waits.h"

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/flag_ops.h"
#include "src/device/spin_watch.h"

namespace gyre {

ncclResult_t enqueueSignalWaits(DeviceComm* comm, const std::vector<SignalWait>& waits, StreamHandle stream) {
  DeviceRuntime* rt = deviceRuntime();
  std::vector<FlagOps> kernels;
  for (const SignalWait& w : waits) {
    uint32_t* slot = const_cast<uint32_t*>(w.slot);
    if (!w.sameProcess) {
      GYRE_CHECK(rt->streamWaitFlag(stream, slot, w.count));
      continue;
    }
    // One kernel holds as many waits as fit: a second kernel would wait
    // at the queue's head for the first.
    if (kernels.empty() || kernels.back().n == kMaxFlagOps) kernels.emplace_back();
    kernels.back().add(slot, w.count, FlagOpKind::kWait, w.peer, w.count);
  }
  if (kernels.empty()) return ncclSuccess;
  OnDevice onDevice(comm->cudaDev);  // a thread may drive ranks of several GPUs
  GYRE_CHECK(comm->signalWatch->allocate());
  for (FlagOps& ops : kernels) {
    comm->signalWatch->arm(&ops, comm->collTimeoutSeconds);
    GYRE_CHECK(enqueueFlagOps(ops, stream, FlagRunner::kKernel));
  }
  return ncclSuccess;
}

void pollSignalTimeout(DeviceComm* comm) {
  int peer = -1;
  uint32_t count = 0;
  if (!comm->signalWatch->takeTimeout(&peer, &count)) return;
  ncclResult_t r = fail(ncclRemoteError, "rank %d: ncclWaitSignal waited %.0f s (GYRE_TIMEOUT) for rank %d's "
                        "signals to reach %u; rank %d never signalled, or its stream's ncclSignal is queued behind "
                        "work this stream queued after the wait (streams sharing a hardware queue, "
                        "CUDA_DEVICE_MAX_CONNECTIONS)", comm->rank, comm->collTimeoutSeconds, peer, count, peer);
  GYRE_WARN("%s", lastErrorText());
  comm->host->markFailed(r, peer);
  comm->signalWatch->abort();  // the communicator failed: its other waits stop too
}

void abortSignalWaits(DeviceComm* comm) { comm->signalWatch->abort(); }

}  // namespace gyre
