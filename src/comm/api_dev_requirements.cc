// C API: the resource requirements of NCCL's device API that a program
// chains into ncclDevCommRequirements::resourceRequirementsList — a set of
// LSA barriers over a team, and the slots of the low-latency all-to-all.
// Each is a buffer of the size its device code (nccl_device/lsa_barrier.h,
// nccl_device/ll_a2a.h) lays out, and a handle ncclDevCommCreate fills.
#include <climits>
#include <cstring>

#include "include/nccl_device.h"
#include "src/comm/api_export.h"
#include "src/debug/error.h"

using namespace gyre;

GYRE_EXPORT ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                         ncclLsaBarrierHandle_t* outHandle,
                                                         ncclDevResourceRequirements_t* outReq) {
  const char* fn = "ncclLsaBarrierCreateRequirement";
  if (!outHandle || !outReq)
    return fail(ncclInvalidArgument, "%s: outHandle (%p) and outReq (%p) must not be NULL", fn,
                static_cast<void*>(outHandle), static_cast<void*>(outReq));
  if (team.nRanks < 1 || team.rank < 0 || team.rank >= team.nRanks || team.stride < 1)
    return fail(ncclInvalidArgument, "%s: team {nRanks %d, rank %d, stride %d} is not a team (use ncclTeamLsa or "
                                     "a factor of it)", fn, team.nRanks, team.rank, team.stride);
  if (nBarriers < 0) return fail(ncclInvalidArgument, "%s: nBarriers is %d, negative", fn, nBarriers);
  memset(static_cast<void*>(outReq), 0, sizeof(*outReq));
  outReq->bufferSize = sizeof(uint32_t) * gyre_device::lsaBarrierWords(nBarriers, team.nRanks);
  outReq->bufferAlign = alignof(uint32_t);
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->bufHandle = 0;
  outHandle->nBarriers = nBarriers;
  return ncclSuccess;
}

GYRE_EXPORT int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  const char* fn = "ncclLLA2ACalcSlots";
  if (maxElts < 0 || maxEltSize < 1) {
    fail(ncclInvalidArgument, "%s: maxElts %d must be at least 0 and maxEltSize %d at least 1", fn, maxElts,
         maxEltSize);
    return -1;
  }
  const long long slots = static_cast<long long>(maxElts) * ((static_cast<long long>(maxEltSize) + 7) / 8);
  if (slots > INT_MAX) {
    fail(ncclInvalidArgument, "%s: %d values of %d bytes need %lld slots, more than an int holds", fn, maxElts,
         maxEltSize, slots);
    return -1;
  }
  return static_cast<int>(slots);
}

GYRE_EXPORT ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                                    ncclDevResourceRequirements_t* outReq) {
  const char* fn = "ncclLLA2ACreateRequirement";
  if (!outHandle || !outReq)
    return fail(ncclInvalidArgument, "%s: outHandle (%p) and outReq (%p) must not be NULL", fn,
                static_cast<void*>(outHandle), static_cast<void*>(outReq));
  if (nBlocks < 1)
    return fail(ncclInvalidArgument, "%s: nBlocks is %d; a session needs at least one block", fn, nBlocks);
  if (nSlots < 1)
    return fail(ncclInvalidArgument, "%s: nSlots is %d; a session needs at least one slot (ncclLLA2ACalcSlots "
                                     "gives how many its values take)", fn, nSlots);
  const size_t lines = static_cast<size_t>(nBlocks) * gyre_device::llA2ABlockLines(nSlots);
  memset(static_cast<void*>(outReq), 0, sizeof(*outReq));
  outReq->bufferSize = lines * sizeof(gyre_device::LLLine);
  outReq->bufferAlign = alignof(gyre_device::LLLine);  // one 16-byte store per line
  outReq->outBufferHandle = &outHandle->bufHandle;
  outHandle->bufHandle = 0;
  outHandle->nSlots = static_cast<uint32_t>(nSlots);
  return ncclSuccess;
}
