// Argument validation shared by every API entry point. Each check records a
// message naming the function, the argument and the offending value.
#pragma once

#include <cstddef>

#include "include/gyre.h"
#include "src/call/datatypes.h"

namespace gyre {

ncclResult_t checkComm(const ncclComm* comm, const char* caller);
ncclResult_t checkDatatype(ncclDataType_t type, const char* caller);
// A built-in operator, or a PreMulSum made on `comm` for `type`.
ncclResult_t checkRedOp(const ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* caller);
// count * elementSize must not overflow.
ncclResult_t checkCount(size_t count, size_t elementSize, const char* caller);
// Non-null (unless count is 0) and aligned to the element size; with
// NCCL_CHECK_POINTERS=1 on a device communicator, also device memory
// (unless `inCheckedBuffer`: an in-place call's second pointer, inside the
// buffer just checked — each query costs about a microsecond on a GPU).
// NCCL_CHECKS_DISABLE=1 skips the alignment and overlap checks (never the
// NULL check, which guards against a crash rather than a wrong answer).
ncclResult_t checkBuffer(const ncclComm* comm, const void* ptr, const char* name, size_t count, size_t elementSize,
                         const char* caller, bool inCheckedBuffer = false);
// Send and receive ranges must be identical (in place) or disjoint.
ncclResult_t checkOverlap(const void* send, size_t sendBytes, const void* recv, size_t recvBytes, const char* caller);
// NCCL_CHECKS_DISABLE=1 (read once).
bool argumentChecksDisabled();
ncclResult_t checkStream(const ncclComm* comm, cudaStream_t stream, const char* caller);

}  // namespace gyre
