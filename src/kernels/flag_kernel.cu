// The flag kernel: one thread runs the launch's flag operations in order
// (src/kernels/flag_loop.h: runFlagOps) with a CUDA context.
#include <cuda_runtime.h>

#include "src/kernels/flag_kernel.h"
#include "src/kernels/flag_loop.h"

namespace gyre {
namespace {

struct CudaFlagThread {
  __device__ uint32_t load(const uint32_t* flag) const { return *reinterpret_cast<const volatile uint32_t*>(flag); }
  __device__ void store(uint32_t* flag, uint32_t value) const { *reinterpret_cast<volatile uint32_t*>(flag) = value; }
  __device__ void fenceSystem() const { __threadfence_system(); }
  __device__ void pause() const { __nanosleep(200); }
  __device__ uint64_t nowNs() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
};

__global__ void flagKernel(FlagOps ops) { runFlagOps(CudaFlagThread{}, ops); }

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
