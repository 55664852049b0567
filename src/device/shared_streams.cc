#include "src/device/shared_streams.h"

#include "src/bootstrap/bootstrap.h"
#include "src/call/coll_kind.h"
#include "src/debug/error.h"

namespace gyre {

ncclResult_t refuseSharedStreams(const std::vector<const DeviceRequest*>& calls, const char* path) {
  for (size_t i = 0; i < calls.size(); ++i)
    for (size_t j = i + 1; j < calls.size(); ++j) {
      const DeviceRequest& a = *calls[i];
      const DeviceRequest& b = *calls[j];
      if (a.stream != b.stream || a.comm == b.comm || a.comm->bootstrap->secret() != b.comm->bootstrap->secret())
        continue;
      return fail(ncclInvalidUsage, "rank %d: %s captured on the stream of rank %d as well (%s); each rank would "
                  "wait in the graph for work queued behind its own, forever. Give each rank its own stream",
                  b.comm->rank, b.coll == CollKind::SendRecv ? (b.isSend ? "ncclSend" : "ncclRecv") : collName(b.coll),
                  a.comm->rank, path);
    }
  return ncclSuccess;
}

}  // namespace gyre
