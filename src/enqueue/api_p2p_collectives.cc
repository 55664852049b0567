// C API: the collectives NCCL defines as groups of sends and receives —
// AlltoAll, Gather, Scatter.
#include <cstdint>
#include <cstring>
#include <vector>

#include "include/gyre.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/enqueue/arg_checks.h"
#include "src/enqueue/coll_config.h"
#include "src/enqueue/enqueue.h"

using namespace gyre;

namespace {

// Runs body() inside a group; the group is closed even if body fails.
template <typename Body>
ncclResult_t asGroup(Body body) {
  GYRE_CHECK(groupStart());
  ncclResult_t r = body();
  ncclResult_t end = groupEnd();
  return r != ncclSuccess ? r : end;
}

// At the root, the one-block buffer (Gather's sendbuff, Scatter's recvbuff)
// must be the root's own block of the nranks-block one (in place, as NCCL
// lays it out) or disjoint from it: any other overlap would have the root's
// sends read blocks its receives are overwriting.
ncclResult_t checkRootOverlap(const char* fn, const ncclComm* comm, const char* blockName, const void* block,
                              const char* wholeName, const void* whole, size_t blockBytes) {
  if (blockBytes == 0 || argumentChecksDisabled()) return ncclSuccess;
  const size_t wholeBytes = blockBytes * comm->nranks, own = blockBytes * comm->rank;
  auto b = reinterpret_cast<uintptr_t>(block), w = reinterpret_cast<uintptr_t>(whole);
  if (b == w + own || b >= w + wholeBytes || w >= b + blockBytes) return ncclSuccess;
  return fail(ncclInvalidArgument,
              "%s: %s [%p, +%zu) and %s [%p, +%zu) overlap at the root (rank %d) without being in place (in place "
              "means %s == %s + rank*count*typesize = %s + %zu bytes)",
              fn, blockName, block, blockBytes, wholeName, whole, wholeBytes, comm->rank, blockName, wholeName,
              wholeName, own);
}

// Gather and Scatter: a valid communicator, datatype and root, and at the
// root buffers that are in place or disjoint.
ncclResult_t checkRooted(const char* fn, ncclComm_t comm, ncclDataType_t datatype, size_t count, int root,
                         const char* blockName, const void* block, const char* wholeName, const void* whole) {
  GYRE_CHECK(checkComm(comm, fn));
  GYRE_CHECK(checkDatatype(datatype, fn));
  GYRE_CHECK(checkCount(count, datatypeSize(datatype) * comm->nranks, fn));
  if (root < 0 || root >= comm->nranks)
    return fail(ncclInvalidArgument, "%s: root %d is outside 0..%d", fn, root, comm->nranks - 1);
  if (comm->rank == root)
    GYRE_CHECK(checkRootOverlap(fn, comm, blockName, block, wholeName, whole, count * datatypeSize(datatype)));
  return ncclSuccess;
}

const char* at(const void* base, size_t index, size_t bytes) {
  return static_cast<const char*>(base) + index * bytes;
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  const char* fn = "ncclAlltoAll";
  GYRE_CHECK(checkComm(comm, fn));
  GYRE_CHECK(checkDatatype(datatype, fn));
  size_t size = datatypeSize(datatype);
  GYRE_CHECK(checkCount(count, size * comm->nranks, fn));
  size_t bytes = count * size;
  GYRE_CHECK(checkOverlap(sendbuff, bytes * comm->nranks, recvbuff, bytes * comm->nranks, fn));
  // In place: every block is both sent and overwritten, so send from a copy.
  // The copy must outlive the exchange, hence not inside an open group.
  // (Device communicators need none: their copy paths send a block that a
  // receive overwrites from a device copy of it, and staged sends read
  // every input block before any received block is written back.)
  if (comm->isHost && sendbuff == recvbuff && count > 0 && comm->nranks > 1) {
    if (groupDepth() > 0)
      return fail(ncclInvalidUsage, "%s: in-place AlltoAll inside ncclGroupStart/End is not supported; call it "
                                    "outside the group or use separate buffers", fn);
    std::vector<char>& copy = comm->alltoallCopy;
    if (copy.size() < bytes * comm->nranks) copy.resize(bytes * comm->nranks);
    memcpy(copy.data(), sendbuff, bytes * comm->nranks);
    sendbuff = copy.data();
  }
  return asGroup([&] {
    for (int p = 0; p < comm->nranks; ++p) {
      GYRE_CHECK(ncclSend(at(sendbuff, p, bytes), count, datatype, p, comm, stream));
      GYRE_CHECK(ncclRecv(const_cast<char*>(at(recvbuff, p, bytes)), count, datatype, p, comm, stream));
    }
    return ncclSuccess;
  });
}

GYRE_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  GYRE_CHECK(checkRooted("ncclGather", comm, datatype, count, root, "sendbuff", sendbuff, "recvbuff", recvbuff));
  size_t bytes = count * datatypeSize(datatype);
  return asGroup([&] {
    if (comm->rank == root)
      for (int p = 0; p < comm->nranks; ++p)
        GYRE_CHECK(ncclRecv(const_cast<char*>(at(recvbuff, p, bytes)), count, datatype, p, comm, stream));
    return ncclSend(sendbuff, count, datatype, root, comm, stream);
  });
}

GYRE_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
  GYRE_CHECK(checkRooted("ncclScatter", comm, datatype, count, root, "recvbuff", recvbuff, "sendbuff", sendbuff));
  size_t bytes = count * datatypeSize(datatype);
  return asGroup([&] {
    if (comm->rank == root)
      for (int p = 0; p < comm->nranks; ++p)
        GYRE_CHECK(ncclSend(at(sendbuff, p, bytes), count, datatype, p, comm, stream));
    return ncclRecv(recvbuff, count, datatype, root, comm, stream);
  });
}

// The per-collective config forms: the config is checked, then the call runs
// as the plain one (these collectives have no algorithm to select).
GYRE_EXPORT ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                            const ncclCollConfig_t* config) {
  const char* fn = "ncclAlltoAllConfig";
  CallOptions opts;
  GYRE_CHECK(readCollConfig(config, fn, &opts));
  GYRE_CHECK(checkNoAlgorithmChoice(opts, fn));
  return ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}

GYRE_EXPORT ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          int root, ncclComm_t comm, cudaStream_t stream,
                                          const ncclCollConfig_t* config) {
  const char* fn = "ncclGatherConfig";
  CallOptions opts;
  GYRE_CHECK(readCollConfig(config, fn, &opts));
  GYRE_CHECK(checkNoAlgorithmChoice(opts, fn));
  return ncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

GYRE_EXPORT ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                                           const ncclCollConfig_t* config) {
  const char* fn = "ncclScatterConfig";
  CallOptions opts;
  GYRE_CHECK(readCollConfig(config, fn, &opts));
  GYRE_CHECK(checkNoAlgorithmChoice(opts, fn));
  return ncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
