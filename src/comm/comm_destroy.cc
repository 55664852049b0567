// Error state and teardown of a communicator.
#include <chrono>
#include <string>
#include <thread>

#include "src/comm/comm.h"
#include "src/comm/comm_init.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/device_layer.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/host/host_comm.h"

namespace gyre {
namespace {

constexpr double kAbortDrainSeconds = 10;
// The teardown's frees wait for the device off the caller's thread
// (deferred_frees.h). Destroy gives them this long to be made, so a
// destroyed communicator normally leaves nothing behind; abort a moment.
constexpr double kDestroyFreesSeconds = 2;
constexpr double kAbortFreesSeconds = 1;

// Device communicators: staged jobs queued on user streams hold the
// communicator, so it may only go once they have run. Abort makes the queued
// ones fail fast; a job stuck behind other work on its stream past the wait
// leaves the communicator allocated (a leak, not a use after free).
ncclResult_t drainStagedJobs(ncclComm_t comm, bool abort) {
  if (!comm->device) return ncclSuccess;
  if (abort) comm->abortFlag.store(true);
  double wait = abort ? kAbortDrainSeconds : comm->collTimeoutSeconds;
  if (drainDeviceWork(comm->device.get(), abort, wait)) return ncclSuccess;
  comm->abortFlag.store(true);
  if (drainDeviceWork(comm->device.get(), true, kAbortDrainSeconds)) return ncclSuccess;
  return fail(ncclInternalError, "%s: collectives are still queued on a stream that does not advance; the "
                                 "communicator of rank %d is left allocated",
              abort ? "ncclCommAbort" : "ncclCommDestroy", comm->rank);
}

}  // namespace

// The error state is set where both executors set it (HostComm::markFailed).
void markCommFailed(ncclComm* comm, ncclResult_t code, int culprit) { comm->host->markFailed(code, culprit); }

namespace {

// An ncclSend whose ncclRecv never came completes anyway when its data fit in
// the connection's buffer (as with NCCL); teardown is the last moment to say
// so. Only host-visible FIFOs (shm, sockets) can be looked at here.
void warnUnreceivedSends(ncclComm* comm) {
  if (comm->abortFlag.load() || comm->asyncError.load() != ncclSuccess) return;
  for (const auto& [peer, c] : comm->p2pRecv) {
    if (!c->fifo.tail || !(c->sharedCounters || c->needsProgress)) continue;
    // A socket step reaches the FIFO only when progress() reads it, and the
    // executor drives idle connections only now and then: read what is there.
    if (c->needsProgress) {
      TentativeFailures look;  // a failure here is no error of the destroy's: it leaves no text
      int culprit = -1;
      (void)c->transport->progress(*c, &culprit);
    }
    uint64_t arrived = loadAcquire(c->fifo.tail);
    if (arrived > c->step)
      GYRE_WARN("rank %d's communicator ends with %llu step(s) of data from rank %d that no ncclRecv took: an "
                "ncclSend of rank %d had no matching ncclRecv on rank %d", comm->rank,
                static_cast<unsigned long long>(arrived - c->step), peer, peer, comm->rank);
  }
}

}  // namespace

void releaseCommResources(ncclComm* comm) {
  releaseDeviceExecutors(comm->device.get(), kAbortDrainSeconds);  // a no-op after destroy's drain
  comm->host->progress.clear();
  // A connection whose set-up failed half way has no state to close.
  auto visit = [comm](auto&& fn) {
    for (Channel& ch : comm->channels) {
      for (Connection& c : ch.send) fn(c);
      for (Connection& c : ch.recv) fn(c);
    }
    for (CommTree& t : comm->trees)
      for (auto& c : t.storage) fn(*c);
    for (auto& c : comm->doubling.storage) fn(*c);
    for (auto& c : comm->mesh.storage) fn(*c);
    for (auto* table : {&comm->p2pSend, &comm->p2pRecv})
      for (auto& [peer, c] : *table) fn(*c);
  };
  visit([](Connection& c) {
    if (c.transport && c.state) c.transport->beginClose(c);
  });
  visit([](Connection& c) {
    if (c.transport && c.state) c.transport->close(c);
  });
  comm->channels.clear();
  comm->trees.clear();
  comm->doubling = CommDoubling();
  comm->mesh = CommMesh();
  comm->p2pSend.clear();
  comm->p2pRecv.clear();
  if (comm->bootstrap) comm->bootstrap->close();
  comm->bootstrap.reset();
}

// Host collectives are complete when they return; device work still queued
// on streams is waited for, and the device state that needs every rank
// (direct mappings, kernel FIFOs) is released, so destroy is then local.
ncclResult_t finalizeCommunicator(ncclComm_t comm) {
  ScopedLogRank logRank(comm->rank);
  if (comm->initThread.joinable()) comm->initThread.join();  // nonblocking init: finish it first
  if (comm->activeCalls.load() > 0)
    return fail(ncclInvalidUsage, "ncclCommFinalize: a collective is still running on this communicator in "
                                  "another thread");
  // Staged jobs run the host executor when their stream reaches them, so the
  // communicator stays usable until they are done.
  GYRE_CHECK(drainStagedJobs(comm, /*abort=*/false));
  comm->finalized.store(true);
  int err = comm->asyncError.load();
  if (err == ncclSuccess) return ncclSuccess;
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  return fail(static_cast<ncclResult_t>(err), "ncclCommFinalize: the communicator failed earlier: %s",
              comm->errorText.c_str());
}

ncclResult_t destroyCommunicator(ncclComm_t comm, bool abort) {
  ScopedLogRank logRank(comm->rank);
  if (comm->initThread.joinable()) {
    if (abort) comm->abortFlag.store(true);  // a set-up still waiting on peers gives up
    comm->initThread.join();
  }
  GYRE_CHECK(drainStagedJobs(comm, abort));
  if (abort) {
    comm->abortFlag.store(true);
    // In-flight calls notice the flag within one poll slice (50 ms); wait for
    // them to leave before freeing what they use.
    while (comm->activeCalls.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  } else if (comm->activeCalls.load() > 0) {
    return fail(ncclInvalidUsage, "ncclCommDestroy: a collective is still running on this communicator in "
                                  "another thread; use ncclCommAbort to interrupt it");
  }
  warnUnreceivedSends(comm);
  stopObserving(&comm->observer);
  comm->tuner = nullptr;  // no call is running: the plugin's finalize may go now
  comm->tunerSession.reset();
  releaseCommResources(comm);
  releaseRegistrations(comm);
  if (comm->device && !waitForDeferredFrees(abort ? kAbortFreesSeconds : kDestroyFreesSeconds))
    GYRE_INFO("INIT", "rank %d: the device still runs work queued before the %s; the communicator's device memory "
              "is freed once it has finished", comm->rank, abort ? "abort" : "destroy");
  comm->magic = 0;  // a later use of this pointer is caught as "not a valid communicator" while memory allows
  GYRE_INFO("INIT", "communicator of rank %d %s", comm->rank, abort ? "aborted" : "destroyed");
  delete comm;
  return ncclSuccess;
}

}  // namespace gyre
