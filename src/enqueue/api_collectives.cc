// C API: collectives. Each entry point validates its arguments, then hands the
// call to enqueueCollective.
#include "include/gyre.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"
#include "src/enqueue/enqueue.h"

using namespace gyre;

GYRE_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const char* fn = "ncclAllReduce";
  GYRE_CHECK(checkComm(comm, fn));
  ScopedLogRank logRank(comm->rank);
  GYRE_CHECK(checkDatatype(datatype, fn));
  GYRE_CHECK(checkRedOp(op, fn));
  size_t size = datatypeSize(datatype);
  GYRE_CHECK(checkCount(count, size, fn));
  GYRE_CHECK(checkStream(comm, stream, fn));
  GYRE_CHECK(checkBuffer(sendbuff, "sendbuff", count, size, fn));
  GYRE_CHECK(checkBuffer(recvbuff, "recvbuff", count, size, fn));
  GYRE_CHECK(checkOverlap(sendbuff, count * size, recvbuff, count * size, fn));
  return enqueueCollective(comm, {CollKind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, 0});
}
