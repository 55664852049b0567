#include "src/enqueue/arg_checks.h"

#include <cstdint>

#include "src/comm/comm.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/fork_guard.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

ncclResult_t checkComm(const ncclComm* comm, const char* caller) {
  GYRE_CHECK(checkNotForkedChild(caller));
  if (!comm) return fail(ncclInvalidArgument, "%s: comm is NULL", caller);
  if (comm->magic != kCommMagic)
    return fail(ncclInvalidArgument, "%s: comm %p is not a valid communicator (never initialized or already destroyed)",
                caller, static_cast<const void*>(comm));
  return ncclSuccess;
}

ncclResult_t checkDatatype(ncclDataType_t type, const char* caller) {
  if (datatypeSize(type) == 0)
    return fail(ncclInvalidArgument, "%s: datatype %d is not a valid ncclDataType_t (0..%d)", caller,
                static_cast<int>(type), ncclNumTypes - 1);
  return ncclSuccess;
}

ncclResult_t checkRedOp(const ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* caller) {
  if (op >= 0 && op < ncclNumOps) return ncclSuccess;
  size_t slot = static_cast<size_t>(op) - ncclNumOps;
  if (op < 0 || slot >= comm->customOps.size() || !comm->customOps[slot].inUse)
    return fail(ncclInvalidArgument,
                "%s: op %d is not a valid reduction operator (sum, prod, max, min, avg, or one made by "
                "ncclRedOpCreatePreMulSum on this communicator)",
                caller, static_cast<int>(op));
  if (comm->customOps[slot].datatype != type)
    return fail(ncclInvalidArgument, "%s: op %d was created for datatype %s but the call uses %s", caller,
                static_cast<int>(op), datatypeName(comm->customOps[slot].datatype), datatypeName(type));
  return ncclSuccess;
}

ncclResult_t checkCount(size_t count, size_t elementSize, const char* caller) {
  // A multiplication that reports overflow, not SIZE_MAX / elementSize: a
  // 64-bit division is tens of cycles on every call.
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, elementSize, &bytes))
    return fail(ncclInvalidArgument, "%s: count %zu of %zu-byte elements overflows the address space", caller, count,
                elementSize);
  return ncclSuccess;
}

bool argumentChecksDisabled() {
  static const bool disabled = [] {
    int64_t v = 0;
    return env::getInt("NCCL_CHECKS_DISABLE", &v) == ncclSuccess && v != 0;
  }();
  return disabled;
}

ncclResult_t checkBuffer(const ncclComm* comm, const void* ptr, const char* name, size_t count, size_t elementSize,
                         const char* caller, bool inCheckedBuffer) {
  if (count == 0) return ncclSuccess;
  if (!ptr) return fail(ncclInvalidArgument, "%s: %s is NULL (count %zu)", caller, name, count);
  if (argumentChecksDisabled()) return ncclSuccess;
  // A mask, not a division per buffer: element sizes are datatypeSize's
  // powers of two (the datatype was checked before).
  if ((reinterpret_cast<uintptr_t>(ptr) & (elementSize - 1)) != 0)
    return fail(ncclInvalidArgument, "%s: %s %p is not aligned to its %zu-byte element size", caller, name, ptr,
                elementSize);
  // Device communicators check unless NCCL_CHECK_POINTERS=0. Host ones only
  // when it is set explicitly: asking CUDA about a pointer would create a
  // CUDA context in a process that may never use a GPU.
  static const bool checkDevice = [] {
    int64_t v = 1;
    return env::getInt("NCCL_CHECK_POINTERS", &v) == ncclSuccess && v != 0;
  }();
  static const bool checkHost = checkDevice && env::lookup("NCCL_CHECK_POINTERS").source != env::Source::Default;
  if (inCheckedBuffer || !(comm->isHost ? checkHost : checkDevice)) return ncclSuccess;
  DeviceRuntime* rt = deviceRuntime();
  if (!rt) return ncclSuccess;  // no CUDA: nothing can be device memory
  bool isDevice = false;
  GYRE_CHECK(rt->isDevicePointer(ptr, &isDevice));
  if (!comm->isHost && !isDevice)
    return fail(ncclInvalidArgument, "%s: %s %p is not device memory (a host pointer, or device memory already "
                "freed, on the communicator of device %d; NCCL_CHECK_POINTERS=0 skips this check)", caller, name, ptr, comm->cudaDev);
  if (comm->isHost && isDevice)
    return fail(ncclInvalidArgument, "%s: %s %p is device memory, but this is a host-memory communicator "
                "(gyreCommInitRankHost); use ncclCommInitRank for device buffers", caller, name, ptr);
  return ncclSuccess;
}

ncclResult_t checkOverlap(const void* send, size_t sendBytes, const void* recv, size_t recvBytes, const char* caller) {
  if (send == recv || sendBytes == 0 || recvBytes == 0 || argumentChecksDisabled()) return ncclSuccess;
  auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  if (s < r + recvBytes && r < s + sendBytes)
    return fail(ncclInvalidArgument,
                "%s: sendbuff [%p, +%zu) and recvbuff [%p, +%zu) overlap without being the same buffer (in place)",
                caller, send, sendBytes, recv, recvBytes);
  return ncclSuccess;
}

ncclResult_t checkStream(const ncclComm* comm, cudaStream_t stream, const char* caller) {
  if (comm->isHost && stream != nullptr)
    return fail(ncclInvalidArgument, "%s: stream must be NULL on a host-memory communicator (got %p)", caller,
                static_cast<void*>(stream));
  return ncclSuccess;
}

}  // namespace gyre
