// One thread runs the flag operations in order. Writes follow a system-wide
// fence, so what this rank's stream did before (a copy kernel's stores) is
// visible to whoever sees the flag; waits poll with a short sleep so a
// waiting kernel leaves its SM's issue slots to the kernels it waits for,
// and give up on abort or after ops.timeoutNs by %globaltimer (reported
// through mapped host memory, src/kernels/flag_work.h).
#include <cuda_runtime.h>

#include "src/kernels/flag_kernel.h"

namespace gyre {
namespace {

__device__ uint32_t loadFlag(const uint32_t* flag) { return *reinterpret_cast<const volatile uint32_t*>(flag); }

__device__ void storeFlag(uint32_t* flag, uint32_t value) {
  __threadfence_system();
  *reinterpret_cast<volatile uint32_t*>(flag) = value;
}

__device__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// False when the wait stopped (abort, or this or another wait timed out).
__device__ bool waitFlag(const FlagOps& ops, const FlagOp& op) {
  const uint64_t start = globalTimer();
  while (!flagReached(loadFlag(op.flag), op.value)) {
    if (flagWaitStopped(ops)) return false;
    if (ops.timeoutNs && globalTimer() - start > ops.timeoutNs) {
      if (ops.stopOnTimeout) storeFlag(ops.stopOnTimeout, 1);
      if (ops.timedOut) {
        ops.timedOut->step = op.step;
        __threadfence_system();
        ops.timedOut->peerPlusOne = static_cast<uint32_t>(op.peer + 1);
      }
      return false;
    }
    __nanosleep(200);
  }
  return true;
}

__global__ void flagKernel(FlagOps ops) {
  for (int i = 0; i < ops.n; ++i) {
    const FlagOp& op = ops.ops[i];
    if (op.kind == FlagOpKind::kWrite) {
      storeFlag(op.flag, op.value);
      continue;
    }
    if (!waitFlag(ops, op)) return;
    __threadfence_system();
    if (op.kind == FlagOpKind::kWaitAndClear) storeFlag(op.flag, 0);
  }
}

}  // namespace

int launchFlagKernel(const FlagOps& ops, cudaStream_t stream) {
  // This launch's own status: cudaGetLastError after <<<>>> would also
  // report an earlier call's non-sticky error (a cudaEventQuery's
  // cudaErrorNotReady) as a failed launch.
  void* args[] = {const_cast<FlagOps*>(&ops)};
  return static_cast<int>(
      cudaLaunchKernel(reinterpret_cast<const void*>(&flagKernel), dim3(1), dim3(1), args, 0, stream));
}

}  // namespace gyre
