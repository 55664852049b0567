// ncclCommSplit: ranks with the same color form a new communicator, ordered by
// (key, old rank). Two small all-gathers over the parent's bootstrap ring: the
// colors and keys, then the unique id that each group's lowest rank creates.
#include <algorithm>
#include <cstring>
#include <vector>

#include "include/gyre.h"
#include "src/bootstrap/rendezvous.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/comm/comm_init.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"

using namespace gyre;

namespace {

struct SplitRequest {
  int32_t color;
  int32_t key;
};

}  // namespace

GYRE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config) {
  const char* fn = "ncclCommSplit";
  GYRE_CHECK(checkComm(comm, fn));
  if (!newcomm) return fail(ncclInvalidArgument, "%s: newcomm is NULL", fn);
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return fail(ncclInvalidArgument, "%s: color %d must be >= 0 or NCCL_SPLIT_NOCOLOR", fn, color);
  ScopedLogRank logRank(comm->rank);
  Deadline deadline = Deadline::afterSeconds(comm->collTimeoutSeconds);
  const int n = comm->nranks;
  std::vector<SplitRequest> requests(n);
  requests[comm->rank] = {color, key};
  GYRE_CHECK(comm->bootstrap->allGather(requests.data(), sizeof(SplitRequest), deadline, &comm->abortFlag));

  // Members of my color in their new order.
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (color != NCCL_SPLIT_NOCOLOR && requests[r].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return requests[a].key < requests[b].key; });
  int leader = members.empty() ? -1 : *std::min_element(members.begin(), members.end());

  // Each group's lowest old rank makes the id. Not from NCCL_COMM_ID: the
  // parent may already be using that address.
  std::vector<ncclUniqueId> ids(n);
  memset(ids.data(), 0, n * sizeof(ncclUniqueId));
  if (leader == comm->rank) {
    UniqueIdContents contents;
    GYRE_CHECK(startDetachedRoot(&contents));
    encodeUniqueId(contents, &ids[comm->rank]);
  }
  GYRE_CHECK(comm->bootstrap->allGather(ids.data(), sizeof(ncclUniqueId), deadline, &comm->abortFlag));
  if (members.empty()) return ncclSuccess;  // NCCL_SPLIT_NOCOLOR: no new communicator

  int newRank = static_cast<int>(std::find(members.begin(), members.end(), comm->rank) - members.begin());
  GYRE_INFO("INIT", "%s: color %d key %d -> rank %d of %zu", fn, color, key, newRank, members.size());
  return initCommunicator(newcomm, static_cast<int>(members.size()), ids[leader], newRank, config, comm->isHost, fn);
}
