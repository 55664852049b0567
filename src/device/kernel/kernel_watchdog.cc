#include "src/device/kernel/kernel_watchdog.h"

#include <chrono>
#include <string>

#include "src/call/coll_kind.h"
#include "src/device/device_comm.h"
#include "src/device/kernel/kernel_calls.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/p2p/p2p_transport.h"
#include "src/device/on_device.h"
#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

constexpr auto kWatchInterval = std::chrono::milliseconds(100);

// Calls fn on every p2p connection of the communicator until it returns true.
template <typename Fn>
bool anyP2P(DeviceComm* comm, Fn fn) {
  for (Connection* c : comm->initConnections)
    if (c->transport == p2pTransport() && c->state && fn(c)) return true;
  return false;
}

// Stops this rank's kernels because of `culprit`, as `reporter`'s notice says.
void abortFor(DeviceComm* comm, int culprit, int reporter) {
  DeviceStatus* st = comm->kernels->statusHost;
  st->deadPeer = culprit + 1;
  st->noticeFrom = reporter + 1;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  __atomic_store_n(&st->abort, 1u, __ATOMIC_RELEASE);  // abortKernels may set it at the same time
}

}  // namespace

void announceCulprit(DeviceComm* comm, int culprit) {
  if (culprit < 0 || comm->kernels->announced.exchange(true)) return;
  anyP2P(comm, [&](Connection* c) {
    c->transport->sendAbortNotice(*c, culprit);
    return false;
  });
}

void announceKernelFailure(DeviceComm* comm) {
  const DeviceStatus* st = comm->kernels->statusHost;
  int32_t kind = __atomic_load_n(&st->error, __ATOMIC_ACQUIRE);
  int culprit = -1;
  if (kind == kDeviceTimeout || kind == kDeviceMismatch || kind == kDevicePeerGone) culprit = st->peer;
  else if (kind == kDeviceAborted && st->deadPeer > 0 && st->noticeFrom > 0) culprit = st->deadPeer - 1;  // pass it on
  announceCulprit(comm, culprit);
}

void failOnDeviceError(DeviceComm* comm, ncclResult_t code) {
  comm->host->markFailed(code, comm->rank);  // tells host-executor peers (staged calls)
  if (comm->kernels) announceCulprit(comm, comm->rank);
}

void checkDeviceFault(DeviceComm* comm) {
  KernelState& k = *comm->kernels;
  if (k.faulted.load()) return;
  if (!k.lastLaunch.anyFailed() || k.faulted.exchange(true)) return;
  std::string why = lastErrorText();
  ncclResult_t r = fail(ncclUnhandledCudaError, "rank %d: the GPU (device %d) reports a sticky CUDA error after a "
                        "collective kernel (the last this rank launched: %s #%llu, count %llu): %s; this process "
                        "can no longer use it", comm->rank, comm->cudaDev,
                        collName(static_cast<CollKind>(k.lastColl.load())),
                        static_cast<unsigned long long>(k.lastOpCount.load()),
                        static_cast<unsigned long long>(k.lastCount.load()), why.c_str());
  GYRE_WARN("%s", lastErrorText());
  failOnDeviceError(comm, r);
}

void KernelWatchdog::start(DeviceComm* comm) {
  stopping_ = false;
  thread_ = std::thread([this, comm] { run(comm); });
}

void KernelWatchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KernelWatchdog::run(DeviceComm* comm) {
  ScopedLogRank logRank(comm->rank);
  // Its event queries would otherwise make a context on device 0.
  enterDeviceOfThisThread(comm->cudaDev);
  relaxCaptureModeOfThisThread();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, kWatchInterval, [&] { return stopping_; })) {
    DeviceStatus* st = comm->kernels->statusHost;
    checkDeviceFault(comm);
    announceKernelFailure(comm);
    if (__atomic_load_n(&st->abort, __ATOMIC_ACQUIRE)) continue;
    anyP2P(comm, [&](Connection* c) {
      int culprit = -1;
      if (c->transport->progress(*c, &culprit) != ncclSuccess) {
        GYRE_INFO("COLL", "rank %d reports rank %d failed; kernels stop", c->peer, culprit);
        abortFor(comm, culprit, c->peer);
        return true;
      }
      // Gone is not failed: a peer may leave once its part is done. Only a
      // lane that still waits on it stops (DeviceCall::peerGone).
      if (peerClosedOf(*c) && !comm->kernels->peerGoneHost[c->peer]) {
        GYRE_INFO("COLL", "rank %d closed its p2p connection; kernels that wait on it stop", c->peer);
        __atomic_store_n(&comm->kernels->peerGoneHost[c->peer], 1u, __ATOMIC_RELEASE);
      }
      return false;
    });
  }
}

}  // namespace gyre
