// C API: user-defined reduction operators (ncclRedOpCreatePreMulSum).
#include <cstring>

#include "include/gyre.h"
#include "src/comm/api_export.h"
#include "src/comm/comm.h"
#include "src/debug/error.h"
#include "src/enqueue/arg_checks.h"

using namespace gyre;

GYRE_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* fn = "ncclRedOpCreatePreMulSum";
  GYRE_CHECK(checkComm(comm, fn));
  GYRE_CHECK(checkDatatype(datatype, fn));
  if (!op) return fail(ncclInvalidArgument, "%s: op is NULL", fn);
  if (!scalar) return fail(ncclInvalidArgument, "%s: scalar is NULL", fn);
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return fail(ncclInvalidArgument, "%s: residence %d is neither ncclScalarDevice nor ncclScalarHostImmediate", fn,
                static_cast<int>(residence));
  CustomRedOp custom;
  custom.inUse = true;
  custom.datatype = datatype;
  custom.residence = residence;
  // On a host communicator "device" memory is the caller's memory, read when
  // each collective starts, as NCCL reads a device scalar when the kernel runs.
  if (residence == ncclScalarDevice) custom.scalarPtr = scalar;
  else memcpy(custom.value, scalar, datatypeSize(datatype));
  size_t slot = 0;
  while (slot < comm->customOps.size() && comm->customOps[slot].inUse) ++slot;
  if (slot == comm->customOps.size()) comm->customOps.emplace_back();
  if (ncclNumOps + slot > static_cast<size_t>(ncclMaxRedOp))
    return fail(ncclInvalidUsage, "%s: too many reduction operators on this communicator", fn);
  comm->customOps[slot] = custom;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + slot);
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  const char* fn = "ncclRedOpDestroy";
  GYRE_CHECK(checkComm(comm, fn));
  if (op < ncclNumOps)
    return fail(ncclInvalidArgument, "%s: op %d is a built-in operator and cannot be destroyed", fn,
                static_cast<int>(op));
  size_t slot = static_cast<size_t>(op) - ncclNumOps;
  if (slot >= comm->customOps.size() || !comm->customOps[slot].inUse)
    return fail(ncclInvalidArgument, "%s: op %d was not created on this communicator (or already destroyed)", fn,
                static_cast<int>(op));
  comm->customOps[slot] = CustomRedOp();
  return ncclSuccess;
}
