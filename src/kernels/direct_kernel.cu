// The direct executor's kernel (src/kernels/direct_work.h): a grid-stride pass
// over this rank's share, 16-byte vectors where every buffer is aligned.
// Peer buffers are IPC mappings of the same GPU's memory, written by other
// processes' kernels that finished before this one started (the stream waited
// on their flags), so plain loads are fresh.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "src/kernels/direct_kernel.h"
#include "src/kernels/primitives/op_dispatch.h"

namespace gyre {
namespace {

constexpr int kDirectThreads = 512;

// The current GPU's SM count, cached per device.
int smCount() {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    cudaGetLastError();
    return 132;
  }
  int sms = cached[device].load(std::memory_order_relaxed);
  if (sms > 0) return sms;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || sms <= 0) {
    cudaGetLastError();
    sms = 132;
  }
  cached[device].store(sms, std::memory_order_relaxed);
  return sms;
}

// The grid's default cap: half the SMs, as ranks of one process run their
// kernels side by side (fitted on an H100: docs/CALIBRATION.md, device
// rows). A kernel that runs alone (one process runs every rank's share)
// gets every SM.
int defaultDirectBlocks(bool wholeGpu) { return wholeGpu ? smCount() : std::max(1, smCount() / 2); }

template <typename T>
struct alignas(16) Pack {
  static constexpr int kElems = 16 / sizeof(T);
  T e[kElems];
};

__device__ bool allAligned16(const DirectCall& c) {
  uintptr_t bits = 0;
  for (int k = 0; k < c.nsrc; ++k) bits |= reinterpret_cast<uintptr_t>(c.src[k]);
  for (int k = 0; k < c.ndst; ++k) bits |= reinterpret_cast<uintptr_t>(c.dst[k]);
  return (bits & 15) == 0;
}

// Packs base, base + stride, ... (kUnroll of them) of this thread, each
// source's loads issued together, so several 16-byte loads are in flight per
// thread (one at a time leaves HBM waiting; src/kernels/collective_kernel.cu
// measured the same).
constexpr int kPassUnroll = 4;

template <typename T, typename Op, int kUnroll>
__device__ __forceinline__ void passOfPacks(const DirectCall& c, const Op& op, const SourceScalars& scalars,
                                            size_t base, size_t stride) {
  using P = Pack<T>;
  P v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) v[u] = reinterpret_cast<const P*>(c.src[0])[base + u * stride];
  if (c.reduce) {
    const Op first = sourceOp(op, c, scalars, 0);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int j = 0; j < P::kElems; ++j) v[u].e[j] = first.pre(v[u].e[j]);
    for (int k = 1; k < c.nsrc; ++k) {
      const Op source = sourceOp(op, c, scalars, k);
      P w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) w[u] = reinterpret_cast<const P*>(c.src[k])[base + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int j = 0; j < P::kElems; ++j) v[u].e[j] = op.apply(v[u].e[j], source.pre(w[u].e[j]));
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int j = 0; j < P::kElems; ++j) v[u].e[j] = op.post(v[u].e[j]);
  }
  for (int k = 0; k < c.ndst; ++k)
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) reinterpret_cast<P*>(c.dst[k])[base + u * stride] = v[u];
}

template <typename T, typename Op>
__global__ void __launch_bounds__(kDirectThreads) directKernel(DirectCall c, Op op) {
  // A peer died (its mappings may be gone) or the call was aborted. One read
  // per block, not per thread: reads of one word by 135k threads queue. The
  // sources' PreMulSum scalars likewise: thread k reads source k's.
  __shared__ bool skip;
  __shared__ SourceScalars scalars;
  if (threadIdx.x == 0) skip = c.abort && *c.abort;
  if (static_cast<int>(threadIdx.x) < c.nsrc) resolveSourceScalar(op, c, static_cast<int>(threadIdx.x), scalars);
  __syncthreads();
  if (skip) return;
  const size_t first = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t done = 0;
  if (allAligned16(c)) {
    using P = Pack<T>;
    const size_t packs = c.count / P::kElems;
    // Whole passes of stride * kPassUnroll packs, then single packs.
    const size_t wide = packs / (stride * kPassUnroll) * (stride * kPassUnroll);
    for (size_t base = first; base < wide; base += stride * kPassUnroll)
      passOfPacks<T, Op, kPassUnroll>(c, op, scalars, base, stride);
    for (size_t i = wide + first; i < packs; i += stride) passOfPacks<T, Op, 1>(c, op, scalars, i, stride);
    done = packs * P::kElems;
  }
  // The tail (or everything, unaligned): element by element.
  DirectCall tail = c;
  for (int k = 0; k < c.nsrc; ++k) tail.src[k] = static_cast<const T*>(c.src[k]) + done;
  for (int k = 0; k < c.ndst; ++k) tail.dst[k] = static_cast<T*>(c.dst[k]) + done;
  tail.count = c.count - done;
  directElements<T, Op>(tail, op, scalars, first, stride);
}

}  // namespace

int launchDirectKernel(const DirectCall& call, cudaStream_t stream) {
  if (call.count == 0) return 0;
  cudaError_t err = cudaSuccess;
  ncclResult_t r = visitCallOp(call, [&](auto op) {
    using Op = decltype(op);
    using T = typename Op::Elem;
    size_t packs = (call.count * sizeof(T) + 15) / 16;
    const size_t cap = static_cast<size_t>(call.maxBlocks > 0 ? call.maxBlocks : defaultDirectBlocks(call.wholeGpu));
    size_t blocks = std::min<size_t>(cap, (packs + kDirectThreads - 1) / kDirectThreads);
    unsigned grid = static_cast<unsigned>(std::max<size_t>(blocks, 1));
    // This launch's own status (see launchCollectiveKernel).
    void* args[] = {const_cast<DirectCall*>(&call), &op};
    err = cudaLaunchKernel(reinterpret_cast<const void*>(&directKernel<T, Op>), dim3(grid), dim3(kDirectThreads),
                           args, 0, stream);
    return ncclSuccess;
  });
  if (r != ncclSuccess) return -1;
  return static_cast<int>(err);
}

}  // namespace gyre
