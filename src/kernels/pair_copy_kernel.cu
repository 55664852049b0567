// The point-to-point kernel: each block runs its part of the launch
// (src/kernels/pair_copy_loop.h: runPairCopyBlock) with a CUDA context.
#include <cuda_runtime.h>

#include "src/kernels/pair_copy_kernel.h"
#include "src/kernels/pair_copy_loop.h"

namespace gyre {
namespace {

constexpr int kThreads = 512;

struct CudaPairBlock {
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ size_t tid() const { return threadIdx.x; }
  __device__ size_t nthreads() const { return blockDim.x; }
  __device__ size_t block() const { return blockIdx.x; }
  __device__ uint32_t blocks() const { return gridDim.x; }
  __device__ bool allAgree(bool ok) const { return __syncthreads_and(ok) != 0; }
  __device__ void sync() const { __syncthreads(); }
  __device__ uint32_t load(const uint32_t* p) const { return *reinterpret_cast<const volatile uint32_t*>(p); }
  __device__ void store(uint32_t* p, uint32_t v) const { *reinterpret_cast<volatile uint32_t*>(p) = v; }
  // System scope: the peer may be another GPU (pair_copy_loop.h).
  __device__ void fence() const { __threadfence_system(); }
  __device__ uint32_t arrive(uint32_t* count) const { return atomicAdd(count, 1u); }
  __device__ void pause() const { __nanosleep(100); }
  __device__ uint64_t nowNs() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
};

__global__ void __launch_bounds__(kThreads) pairCopyKernel(PairCopyWork w) { runPairCopyBlock(CudaPairBlock{}, w); }

}  // namespace

int launchPairCopyKernel(const PairCopyWork& work, cudaStream_t stream) {
  if (work.n == 0) return 0;
  // This launch's own status (see launchFlagKernel).
  void* args[] = {const_cast<PairCopyWork*>(&work)};
  return static_cast<int>(cudaLaunchKernel(reinterpret_cast<const void*>(&pairCopyKernel),
                                           dim3(pairCopyBlocks(work)), dim3(kThreads), args, 0, stream));
}

}  // namespace gyre
