// C API: collectives, point-to-point and groups. Each entry point validates
// its arguments (errors name the function and argument), then enqueues.
#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "include/gyre.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/debug/fork_guard.h"
#include "src/debug/log.h"
#include "src/enqueue/arg_checks.h"
#include "src/enqueue/coll_config.h"
#include "src/enqueue/enqueue.h"
#include "src/enqueue/launch.h"
#include "src/plan/planner.h"

using namespace gyre;

namespace {

// Argument errors inside an open group also fail its ncclGroupEnd.
#define CHECK_ARG(call)                 \
  do {                                  \
    ncclResult_t r_ = (call);           \
    if (r_ != ncclSuccess) {            \
      noteGroupError(r_);               \
      return r_;                        \
    }                                   \
  } while (0)

ncclResult_t checkCommon(const char* fn, ncclComm_t comm, ncclDataType_t type, size_t count, cudaStream_t stream) {
  GYRE_CHECK(checkComm(comm, fn));
  GYRE_CHECK(checkDatatype(type, fn));
  GYRE_CHECK(checkCount(count, datatypeSize(type), fn));
  return checkStream(comm, stream, fn);
}

ncclResult_t checkRoot(const char* fn, const ncclComm* comm, int root, const char* name) {
  if (root < 0 || root >= comm->nranks)
    return fail(ncclInvalidArgument, "%s: %s %d is outside 0..%d", fn, name, root, comm->nranks - 1);
  return ncclSuccess;
}

// Whether `block` is this rank's block of `whole`, `offset` bytes in: an
// in-place AllGather (sendbuff in recvbuff) or ReduceScatter (the reverse).
bool isOwnBlock(const void* block, const void* whole, size_t offset) {
  return static_cast<const char*>(block) == static_cast<const char*>(whole) + offset;
}

// The small range (one rank's block) must be exactly this rank's block of the
// large one (in place) or disjoint from it.
ncclResult_t checkBlockOverlap(const char* fn, const void* block, size_t blockBytes, const void* whole,
                               size_t wholeBytes, size_t inPlaceOffset) {
  auto b = reinterpret_cast<uintptr_t>(block), w = reinterpret_cast<uintptr_t>(whole);
  if (isOwnBlock(block, whole, inPlaceOffset) || blockBytes == 0 || argumentChecksDisabled()) return ncclSuccess;
  if (b < w + wholeBytes && w < b + blockBytes)
    return fail(ncclInvalidArgument,
                "%s: sendbuff and recvbuff overlap without being in place (in place means this rank's block, "
                "%zu bytes into the larger buffer)", fn, inPlaceOffset);
  return ncclSuccess;
}

ncclResult_t allReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                       ncclComm_t comm, cudaStream_t stream, const char* fn, const CallOptions& opts) {
  CHECK_ARG(checkCommon(fn, comm, datatype, count, stream));
  ScopedLogRank logRank(comm->rank);
  size_t size = datatypeSize(datatype);
  CHECK_ARG(checkRedOp(comm, op, datatype, fn));
  CHECK_ARG(checkBuffer(comm, sendbuff, "sendbuff", count, size, fn));
  CHECK_ARG(checkBuffer(comm, recvbuff, "recvbuff", count, size, fn, recvbuff == sendbuff));
  CHECK_ARG(checkOverlap(sendbuff, count * size, recvbuff, count * size, fn));
  return enqueue(comm,
                 withOptions(opts, CollKind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, false, stream));
}

ncclResult_t broadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream, const char* fn, const CallOptions& opts) {
  CHECK_ARG(checkCommon(fn, comm, datatype, count, stream));
  ScopedLogRank logRank(comm->rank);
  size_t size = datatypeSize(datatype);
  CHECK_ARG(checkRoot(fn, comm, root, "root"));
  if (comm->rank == root) {
    CHECK_ARG(checkBuffer(comm, sendbuff, "sendbuff", count, size, fn));
    CHECK_ARG(checkOverlap(sendbuff, count * size, recvbuff, count * size, fn));
  }
  CHECK_ARG(checkBuffer(comm, recvbuff, "recvbuff", count, size, fn, comm->rank == root && recvbuff == sendbuff));
  return enqueue(
      comm, withOptions(opts, CollKind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, false, stream));
}

ncclResult_t reduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                    int root, ncclComm_t comm, cudaStream_t stream, const char* fn, const CallOptions& opts) {
  CHECK_ARG(checkCommon(fn, comm, datatype, count, stream));
  ScopedLogRank logRank(comm->rank);
  size_t size = datatypeSize(datatype);
  CHECK_ARG(checkRedOp(comm, op, datatype, fn));
  CHECK_ARG(checkRoot(fn, comm, root, "root"));
  CHECK_ARG(checkBuffer(comm, sendbuff, "sendbuff", count, size, fn));
  if (comm->rank == root) {
    CHECK_ARG(checkBuffer(comm, recvbuff, "recvbuff", count, size, fn, recvbuff == sendbuff));
    CHECK_ARG(checkOverlap(sendbuff, count * size, recvbuff, count * size, fn));
  }
  return enqueue(comm,
                 withOptions(opts, CollKind::Reduce, sendbuff, recvbuff, count, datatype, op, root, false, stream));
}

ncclResult_t allGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                       cudaStream_t stream, const char* fn, const CallOptions& opts) {
  CHECK_ARG(checkCommon(fn, comm, datatype, sendcount, stream));
  ScopedLogRank logRank(comm->rank);
  size_t size = datatypeSize(datatype);
  CHECK_ARG(checkCount(sendcount, size * comm->nranks, fn));
  size_t bytes = sendcount * size;
  CHECK_ARG(checkBuffer(comm, sendbuff, "sendbuff", sendcount, size, fn));
  CHECK_ARG(
      checkBuffer(comm, recvbuff, "recvbuff", sendcount, size, fn, isOwnBlock(sendbuff, recvbuff, bytes * comm->rank)));
  CHECK_ARG(checkBlockOverlap(fn, sendbuff, bytes, recvbuff, bytes * comm->nranks, bytes * comm->rank));
  return enqueue(
      comm, withOptions(opts, CollKind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, false, stream));
}

ncclResult_t reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const char* fn,
                           const CallOptions& opts) {
  CHECK_ARG(checkCommon(fn, comm, datatype, recvcount, stream));
  ScopedLogRank logRank(comm->rank);
  size_t size = datatypeSize(datatype);
  CHECK_ARG(checkRedOp(comm, op, datatype, fn));
  CHECK_ARG(checkCount(recvcount, size * comm->nranks, fn));
  size_t bytes = recvcount * size;
  CHECK_ARG(checkBuffer(comm, sendbuff, "sendbuff", recvcount, size, fn));
  CHECK_ARG(
      checkBuffer(comm, recvbuff, "recvbuff", recvcount, size, fn, isOwnBlock(recvbuff, sendbuff, bytes * comm->rank)));
  // In place: recvbuff is this rank's block of sendbuff.
  CHECK_ARG(checkBlockOverlap(fn, recvbuff, bytes, sendbuff, bytes * comm->nranks, bytes * comm->rank));
  return enqueue(
      comm, withOptions(opts, CollKind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, false, stream));
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, "ncclAllReduce", {});
}

GYRE_EXPORT ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                             cudaStream_t stream, const ncclCollConfig_t* config) {
  CallOptions opts;
  CHECK_ARG(readCollConfig(config, "ncclAllReduceConfig", &opts));
  return allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, "ncclAllReduceConfig", opts);
}

GYRE_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclBroadcast", {});
}

GYRE_EXPORT ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                             ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                                             const ncclCollConfig_t* config) {
  CallOptions opts;
  CHECK_ARG(readCollConfig(config, "ncclBroadcastConfig", &opts));
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclBroadcastConfig", opts);
}

GYRE_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, "ncclReduce", {});
}

GYRE_EXPORT ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                                          const ncclCollConfig_t* config) {
  CallOptions opts;
  CHECK_ARG(readCollConfig(config, "ncclReduceConfig", &opts));
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, "ncclReduceConfig", opts);
}

GYRE_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                       ncclComm_t comm, cudaStream_t stream) {
  return allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream, "ncclAllGather", {});
}

GYRE_EXPORT ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                             ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                             const ncclCollConfig_t* config) {
  CallOptions opts;
  CHECK_ARG(readCollConfig(config, "ncclAllGatherConfig", &opts));
  return allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream, "ncclAllGatherConfig", opts);
}

GYRE_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, "ncclReduceScatter", {});
}

GYRE_EXPORT ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                 ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                 cudaStream_t stream, const ncclCollConfig_t* config) {
  CallOptions opts;
  CHECK_ARG(readCollConfig(config, "ncclReduceScatterConfig", &opts));
  return reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, "ncclReduceScatterConfig", opts);
}

GYRE_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

GYRE_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  const char* fn = "ncclSend";
  CHECK_ARG(checkCommon(fn, comm, datatype, count, stream));
  ScopedLogRank logRank(comm->rank);
  CHECK_ARG(checkRoot(fn, comm, peer, "peer"));
  CHECK_ARG(checkBuffer(comm, sendbuff, "sendbuff", count, datatypeSize(datatype), fn));
  return enqueue(comm, makeCall(CollKind::SendRecv, sendbuff, nullptr, count, datatype, ncclSum, peer, true, stream));
}

GYRE_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
  const char* fn = "ncclRecv";
  CHECK_ARG(checkCommon(fn, comm, datatype, count, stream));
  ScopedLogRank logRank(comm->rank);
  CHECK_ARG(checkRoot(fn, comm, peer, "peer"));
  CHECK_ARG(checkBuffer(comm, recvbuff, "recvbuff", count, datatypeSize(datatype), fn));
  return enqueue(comm, makeCall(CollKind::SendRecv, nullptr, recvbuff, count, datatype, ncclSum, peer, false, stream));
}

GYRE_EXPORT ncclResult_t ncclGroupStart() {
  GYRE_CHECK(checkNotForkedChild("ncclGroupStart"));
  return groupStart();
}
GYRE_EXPORT ncclResult_t ncclGroupEnd() {
  GYRE_CHECK(checkNotForkedChild("ncclGroupEnd"));
  return groupEnd();
}

GYRE_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  const char* fn = "ncclGroupSimulateEnd";
  if (simInfo && (simInfo->magic != NCCL_SIM_INFO_MAGIC || simInfo->size < sizeof(ncclSimInfo_t)))
    return fail(ncclInvalidArgument, "%s: simInfo was not initialised with NCCL_SIM_INFO_INITIALIZER", fn);
  std::vector<PendingCall> calls;
  GYRE_CHECK(groupSimulateEnd(&calls));
  // Calls of one communicator run one after another; different communicators
  // overlap, so the group takes as long as its busiest communicator.
  std::map<ncclComm*, double> perComm;
  for (const PendingCall& c : calls) {
    if (!c.comm->topology) continue;  // still initialising
    size_t bytes = collectiveBytes(c.coll, c.count, datatypeSize(c.datatype), c.comm->nranks);
    perComm[c.comm] += predictedTimeUs(c.comm->topology->tuning, c.coll, bytes);
  }
  double longest = 0;
  for (const auto& [comm, us] : perComm) longest = std::max(longest, us);
  if (simInfo) simInfo->estimatedTime = static_cast<float>(longest);
  return ncclSuccess;
}
