// ncclCommShrink, ncclCommRevoke and ncclCommInitRankScalable (and its host twin).
//
// Shrink is called only by the ranks that stay (the excluded ones may be
// dead), so it cannot use the parent's bootstrap ring, which needs every
// rank. Instead the lowest surviving rank makes a fresh unique id and hands
// it to each survivor over that survivor's connection to its acceptor (a tag
// per shrink, so successive shrinks never mix); then the survivors run a
// normal init, in their old order.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "src/bootstrap/acceptor.h"
#include "src/bootstrap/rendezvous.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/comm_init.h"
#include "src/device/device_layer.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"

using namespace gyre;

namespace {

// Acceptor tags for shrink rendezvous, above every transport tag.
constexpr int kShrinkTagBase = 1 << 30;  // data-socket tags reach ~2^26

// Stops in-flight work the way ncclCommAbort does, without destroying.
void stopInFlight(ncclComm* comm) {
  comm->abortFlag.store(true);
  abortDeviceWork(comm->device.get());
  while (comm->activeCalls.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

ncclResult_t checkExcludeList(const char* fn, const ncclComm* comm, const int* list, int count,
                              std::vector<bool>* excluded) {
  if (count < 0 || count >= comm->nranks)
    return fail(ncclInvalidArgument, "%s: excludeRanksCount %d must be in 0..%d", fn, count, comm->nranks - 1);
  if (count > 0 && !list) return fail(ncclInvalidArgument, "%s: excludeRanksList is NULL", fn);
  excluded->assign(comm->nranks, false);
  for (int i = 0; i < count; ++i) {
    int r = list[i];
    if (r < 0 || r >= comm->nranks)
      return fail(ncclInvalidArgument, "%s: excluded rank %d is outside 0..%d", fn, r, comm->nranks - 1);
    if ((*excluded)[r]) return fail(ncclInvalidArgument, "%s: rank %d is listed twice", fn, r);
    (*excluded)[r] = true;
  }
  if ((*excluded)[comm->rank])
    return fail(ncclInvalidUsage, "%s: rank %d is in excludeRanksList; excluded ranks must not call it", fn,
                comm->rank);
  return ncclSuccess;
}

// The new id, from the lowest survivor to every other survivor.
ncclResult_t shareShrinkId(ncclComm* comm, const std::vector<int>& survivors, int tag, ncclUniqueId* id) {
  Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
  std::atomic<bool> never{false};  // the parent's abort flag may be set (NCCL_SHRINK_ABORT, revoke)
  Bootstrap& boot = *comm->bootstrap;
  const char* what = "ncclCommShrink rendezvous";
  if (survivors[0] == comm->rank) {
    UniqueIdContents contents;
    GYRE_CHECK(startDetachedRoot(&contents));
    encodeUniqueId(contents, id);
    for (size_t i = 1; i < survivors.size(); ++i) {
      Socket s;
      GYRE_CHECK(boot.acceptor().acceptFrom(survivors[i], tag, deadline, &never, &s));
      GYRE_CHECK(s.sendAll(id, sizeof(*id), deadline, &never, what));
    }
    return ncclSuccess;
  }
  Socket s;
  NetAddress leader = NetAddress::fromWire(boot.peers()[survivors[0]].listen);
  GYRE_CHECK(connectToPeer(leader, boot.link(), comm->rank, tag, deadline, &never, &s, what));
  return s.recvAll(id, sizeof(*id), deadline, &never, what);
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const char* fn = "ncclCommShrink";
  GYRE_CHECK(checkComm(comm, fn));
  if (!newcomm) return fail(ncclInvalidArgument, "%s: newcomm is NULL", fn);
  *newcomm = nullptr;
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return fail(ncclInvalidArgument, "%s: shrinkFlags 0x%x is not NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT", fn,
                shrinkFlags);
  std::vector<bool> excluded;
  GYRE_CHECK(checkExcludeList(fn, comm, excludeRanksList, excludeRanksCount, &excluded));
  ScopedLogRank logRank(comm->rank);
  if (shrinkFlags == NCCL_SHRINK_ABORT) stopInFlight(comm);
  std::vector<int> survivors;
  for (int r = 0; r < comm->nranks; ++r)
    if (!excluded[r]) survivors.push_back(r);
  int tag = kShrinkTagBase + comm->shrinkCount++;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  GYRE_CHECK(shareShrinkId(comm, survivors, tag, &id));
  int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), comm->rank) - survivors.begin());
  GYRE_INFO("INIT", "%s: rank %d -> rank %d of %zu", fn, comm->rank, newRank, survivors.size());
  return initCommunicator(newcomm, static_cast<int>(survivors.size()), id, newRank, config, comm->isHost, fn);
}

GYRE_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  const char* fn = "ncclCommRevoke";
  GYRE_CHECK(checkComm(comm, fn));
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return fail(ncclInvalidArgument, "%s: revokeFlags 0x%x must be NCCL_REVOKE_DEFAULT (0)", fn, revokeFlags);
  ScopedLogRank logRank(comm->rank);
  stopInFlight(comm);
  GYRE_INFO("INIT", "%s: communicator of rank %d revoked; shrink, destroy or abort it", fn, comm->rank);
  return ncclSuccess;
}

namespace {
ncclResult_t initScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, const ncclUniqueId* commIds,
                          ncclConfig_t* config, bool isHost, const char* fn) {
  if (nId < 1) return fail(ncclInvalidArgument, "%s: nId %d must be at least 1", fn, nId);
  if (!commIds) return fail(ncclInvalidArgument, "%s: commIds is NULL", fn);
  // Each id's root serves one block of ranks (src/bootstrap/root_blocks.h).
  return initCommunicator(newcomm, nranks, std::vector<ncclUniqueId>(commIds, commIds + nId), myrank, config,
                          isHost, fn);
}
}  // namespace

GYRE_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                  ncclUniqueId* commIds, ncclConfig_t* config) {
  return initScalable(newcomm, nranks, myrank, nId, commIds, config, /*isHost=*/false, "ncclCommInitRankScalable");
}

GYRE_EXPORT ncclResult_t gyreCommInitRankScalableHost(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  return initScalable(newcomm, nranks, myrank, nId, commIds, config, /*isHost=*/true,
                      "gyreCommInitRankScalableHost");
}
