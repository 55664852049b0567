// C API: ncclCommGetUniqueId and ncclCommGrow. A grow is a new communicator
// of nRanks made from a fresh rendezvous: the existing ranks keep their
// ranks (they learn the id from the rank that made it, over the old
// communicator's bootstrap) and the new ranks join with the id and the ranks
// after them. The old communicator stays usable.
#include <cstring>
#include <mutex>
#include <vector>

#include "include/gyre.h"
#include "src/bootstrap/rendezvous.h"
#include "src/bootstrap/unique_id.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/comm_init.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"

using namespace gyre;

namespace {

// What each existing rank contributes to the id exchange.
struct GrowOffer {
  int32_t hasId;
  ncclUniqueId id;
};

}  // namespace

GYRE_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  const char* fn = "ncclCommGetUniqueId";
  GYRE_CHECK(checkComm(comm, fn));
  if (!uniqueId) return fail(ncclInvalidArgument, "%s: uniqueId is NULL", fn);
  std::lock_guard<std::mutex> lock(comm->growMutex);
  if (comm->growIdPending)
    return fail(ncclInvalidUsage, "%s: rank %d already holds an id that no ncclCommGrow has consumed yet", fn,
                comm->rank);
  // A fresh root (not NCCL_COMM_ID's address, which the communicator may use).
  UniqueIdContents contents;
  GYRE_CHECK(startDetachedRoot(&contents));
  contents.hostGrow = comm->isHost;
  encodeUniqueId(contents, &comm->growId);
  comm->growIdPending = true;
  *uniqueId = comm->growId;
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                                      ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* fn = "ncclCommGrow";
  if (!newcomm) return fail(ncclInvalidArgument, "%s: newcomm is NULL", fn);
  *newcomm = nullptr;
  if (!comm) {
    // A new rank: it brings the id and its rank.
    if (!uniqueId) return fail(ncclInvalidArgument, "%s: a new rank (comm NULL) must pass the uniqueId", fn);
    if (nRanks < 2 || rank < 1 || rank >= nRanks)
      return fail(ncclInvalidArgument, "%s: a new rank's rank %d must be in 1..nRanks-1 (nRanks %d)", fn, rank,
                  nRanks);
    UniqueIdContents contents;
    GYRE_CHECK(decodeUniqueId(*uniqueId, &contents));
    return initCommunicator(newcomm, nRanks, *uniqueId, rank, config, contents.hostGrow, fn);
  }
  GYRE_CHECK(checkComm(comm, fn));
  if (rank != -1)
    return fail(ncclInvalidArgument, "%s: an existing rank passes rank -1 (keeps its rank %d), not %d", fn,
                comm->rank, rank);
  if (nRanks <= comm->nranks)
    return fail(ncclInvalidArgument, "%s: nRanks %d must exceed the communicator's %d ranks", fn, nRanks,
                comm->nranks);
  ScopedLogRank logRank(comm->rank);
  GrowOffer mine{};
  if (uniqueId) {
    std::lock_guard<std::mutex> lock(comm->growMutex);
    if (!comm->growIdPending || memcmp(uniqueId, &comm->growId, sizeof(ncclUniqueId)) != 0)
      return fail(ncclInvalidArgument, "%s: rank %d's uniqueId was not made by ncclCommGetUniqueId on this "
                                       "communicator (or a grow consumed it already)", fn, comm->rank);
    mine.hasId = 1;
    mine.id = *uniqueId;
  }
  Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
  std::vector<GrowOffer> offers(comm->nranks);
  offers[comm->rank] = mine;
  GYRE_CHECK(comm->bootstrap->allGather(offers.data(), sizeof(GrowOffer), deadline, &comm->abortFlag));
  int root = -1;
  for (int r = 0; r < comm->nranks; ++r) {
    if (!offers[r].hasId) continue;
    if (root >= 0)
      return fail(ncclInvalidUsage, "%s: ranks %d and %d both passed a uniqueId; exactly one existing rank does", fn,
                  root, r);
    root = r;
  }
  if (root < 0)
    return fail(ncclInvalidUsage, "%s: no existing rank passed the uniqueId from ncclCommGetUniqueId", fn);
  if (root == comm->rank) {
    std::lock_guard<std::mutex> lock(comm->growMutex);
    comm->growIdPending = false;  // consumed, whatever the rendezvous gives
  }
  GYRE_INFO("INIT", "%s: rank %d of %d joins a communicator of %d (id from rank %d)", fn, comm->rank, comm->nranks,
            nRanks, root);
  return initCommunicator(newcomm, nRanks, offers[root].id, comm->rank, config, comm->isHost, fn);
}
