#include "src/device/kernel_watchdog.h"

#include <chrono>

#include "src/comm/comm.h"
#include "src/debug/log.h"
#include "transport/p2p/p2p_transport.h"

namespace gyre {
namespace {

constexpr auto kWatchInterval = std::chrono::milliseconds(100);

// Calls fn on every p2p connection of the communicator until it returns true.
template <typename Fn>
bool anyP2P(ncclComm* comm, Fn fn) {
  auto visit = [&](Connection* c) { return c && c->transport == p2pTransport() && c->state && fn(c); };
  for (Channel& ch : comm->channels)
    for (auto* list : {&ch.sendPtrs, &ch.recvPtrs})
      for (Connection* c : *list)
        if (visit(c)) return true;
  for (CommTree& t : comm->trees)
    for (auto& c : t.storage)
      if (visit(c.get())) return true;
  for (auto& c : comm->doubling.storage)
    if (visit(c.get())) return true;
  return false;
}

// Stops this rank's kernels because of `culprit`, as `reporter` (a peer's
// notice, or -1: the peer itself left) says.
void abortFor(ncclComm* comm, int culprit, int reporter) {
  DeviceStatus* st = comm->kernels->statusHost;
  st->deadPeer = culprit + 1;
  st->noticeFrom = reporter + 1;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  st->abort = 1;
}

}  // namespace

void KernelWatchdog::start(ncclComm* comm) {
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

void KernelWatchdog::run(ncclComm* comm) {
  ScopedLogRank logRank(comm->rank);
  std::unique_lock<std::mutex> lock(mutex_);
  bool announced = false;
  while (!wake_.wait_for(lock, kWatchInterval, [&] { return stopping_; })) {
    DeviceStatus* st = comm->kernels->statusHost;
    // This rank's kernel gave up on a peer (timeout, mismatch): tell every
    // peer, so kernels waiting on this rank stop now instead of timing out.
    int32_t kind = __atomic_load_n(&st->error, __ATOMIC_ACQUIRE);
    if (!announced && (kind == kDeviceTimeout || kind == kDeviceMismatch)) {
      announced = true;
      anyP2P(comm, [&](Connection* c) {
        c->transport->sendAbortNotice(*c, st->peer);
        return false;
      });
    }
    if (st->abort) continue;
    anyP2P(comm, [&](Connection* c) {
      int culprit = -1;
      if (c->transport->progress(*c, &culprit) != ncclSuccess) {
        GYRE_INFO("COLL", "rank %d reports rank %d failed; kernels stop", c->peer, culprit);
        abortFor(comm, culprit, c->peer);
        return true;
      }
      if (!c->peerClosed) return false;
      GYRE_INFO("COLL", "rank %d closed its p2p connection; kernels waiting on it stop", c->peer);
      abortFor(comm, c->peer, -1);
      return true;
    });
  }
}

}  // namespace gyre
