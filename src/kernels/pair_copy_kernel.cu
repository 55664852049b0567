// The point-to-point kernel (src/kernels/pair_copy_work.h). Every block takes
// part in every copy of the launch, a grid-stride loop of 16-byte vectors
// where both buffers allow it; thread 0 of each block does the block's flag
// work. Peers are ranks of this process on this GPU, so device-scope fences
// order the data before the flags.
#include <cuda_runtime.h>

#include <algorithm>

#include "src/kernels/pair_copy_kernel.h"

namespace gyre {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 32;            // per rank: the ranks' kernels must all be resident at once
constexpr size_t kBytesPerBlock = 1 << 20;  // smaller batches take fewer blocks

__device__ uint32_t load(const uint32_t* p) { return *reinterpret_cast<const volatile uint32_t*>(p); }
__device__ void store(uint32_t* p, uint32_t v) { *reinterpret_cast<volatile uint32_t*>(p) = v; }

__device__ uint64_t globalTimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// False when the communicator was aborted, or this or an earlier wait of it
// timed out, first.
__device__ bool waitSet(const uint32_t* flag, const PairCopyWork& w, int32_t peer) {
  const uint64_t start = globalTimer();
  while (load(flag) == 0) {
    if (w.abort && *w.abort) return false;
    if (w.timedOut && *w.timedOut) return false;
    if (w.timeoutNs && globalTimer() - start > w.timeoutNs) {
      if (w.timedOut) *w.timedOut = static_cast<uint32_t>(peer + 1);
      return false;
    }
    __nanosleep(100);
  }
  __threadfence();
  return true;
}

__device__ void copyPart(const PairCopy& p) {
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t done = 0;
  if (((reinterpret_cast<uintptr_t>(p.src) | reinterpret_cast<uintptr_t>(p.dst)) & 15) == 0) {
    const size_t vectors = p.bytes / 16;
    const uint4* s = static_cast<const uint4*>(p.src);
    uint4* d = static_cast<uint4*>(p.dst);
    for (size_t i = first; i < vectors; i += stride) d[i] = s[i];
    done = vectors * 16;
  }
  const unsigned char* s = static_cast<const unsigned char*>(p.src);
  unsigned char* d = static_cast<unsigned char*>(p.dst);
  for (size_t i = done + first; i < p.bytes; i += stride) d[i] = s[i];
}

__global__ void __launch_bounds__(kThreads) pairCopyKernel(PairCopyWork w) {
  __shared__ bool go;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int i = 0; i < w.n; ++i)
      if (w.pairs[i].role == PairRole::kFirst) store(&w.pairs[i].flags->ready, 1);
  for (int i = 0; i < w.n; ++i) {
    const PairCopy& p = w.pairs[i];
    if (p.role != PairRole::kSecond) continue;
    if (threadIdx.x == 0) go = waitSet(&p.flags->ready, w, p.peer);
    __syncthreads();
    if (!go) return;
    copyPart(p);
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      if (atomicAdd(&p.flags->arrived, 1u) == gridDim.x - 1) {
        store(&p.flags->ready, 0);
        store(&p.flags->arrived, 0);
        __threadfence();
        store(&p.flags->done, 1);
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0)
    for (int i = 0; i < w.n; ++i)
      if (w.pairs[i].role == PairRole::kFirst) {
        if (!waitSet(&w.pairs[i].flags->done, w, w.pairs[i].peer)) return;
        store(&w.pairs[i].flags->done, 0);
      }
}

}  // namespace

int launchPairCopyKernel(const PairCopyWork& work, cudaStream_t stream) {
  if (work.n == 0) return 0;
  size_t bytes = 0;
  for (int i = 0; i < work.n; ++i) bytes = std::max<size_t>(bytes, work.pairs[i].bytes);
  const unsigned blocks = static_cast<unsigned>(std::clamp<size_t>(bytes / kBytesPerBlock, 1, kMaxBlocks));
  // This launch's own status (see launchFlagKernel).
  void* args[] = {const_cast<PairCopyWork*>(&work)};
  return static_cast<int>(
      cudaLaunchKernel(reinterpret_cast<const void*>(&pairCopyKernel), dim3(blocks), dim3(kThreads), args, 0, stream));
}

}  // namespace gyre
