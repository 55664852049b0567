#include "src/device/kernel_watchdog.h"

#include <chrono>

#include "src/comm/comm.h"
#include "src/debug/log.h"
#include "transport/p2p/p2p_transport.h"

namespace gyre {
namespace {

constexpr auto kWatchInterval = std::chrono::milliseconds(100);

// The first p2p connection whose peer closed its end, or null.
Connection* closedPeer(ncclComm* comm) {
  auto check = [](Connection* c) -> Connection* {
    if (!c || c->transport != p2pTransport() || !c->state) return nullptr;
    int culprit = -1;
    c->transport->progress(*c, &culprit);
    return c->peerClosed ? c : nullptr;
  };
  for (Channel& ch : comm->channels)
    for (auto* list : {&ch.sendPtrs, &ch.recvPtrs})
      for (Connection* c : *list)
        if (check(c)) return c;
  for (CommTree& t : comm->trees)
    for (auto& c : t.storage)
      if (check(c.get())) return c.get();
  for (auto& c : comm->doubling.storage)
    if (check(c.get())) return c.get();
  return nullptr;
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
  while (!wake_.wait_for(lock, kWatchInterval, [&] { return stopping_; })) {
    Connection* c = closedPeer(comm);
    if (!c) continue;
    DeviceStatus* st = comm->kernels->statusHost;
    st->deadPeer = c->peer + 1;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    st->abort = 1;
    GYRE_INFO("COLL", "rank %d closed its p2p connection; kernels waiting on it stop", c->peer);
    return;
  }
}

}  // namespace gyre
