// The collective kernel: block b runs its lanes of the launch
// (src/kernels/lane_loop.h: runBlock) with a CUDA block context. One instantiation per (type, operator), the same
// set the host executor has.
#include <cuda_runtime.h>

#include <cstdint>

#include "src/kernels/collective_kernel.h"
#include "src/kernels/lane_loop.h"
#include "src/kernels/primitives/op_dispatch.h"

namespace gyre {
namespace {

// Data in FIFO slots was written by another block (or GPU, over P2P) since
// this SM may last have cached it: received elements are loaded at L2 (.cg),
// which is coherent for the device and for peer memory.
template <typename T>
__device__ __forceinline__ T loadFresh(const T* p) {
  if constexpr (sizeof(T) == 16) {
    uint4 v = __ldcg(reinterpret_cast<const uint4*>(p));
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 8) {
    unsigned long long v = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 4) {
    unsigned int v = __ldcg(reinterpret_cast<const unsigned int*>(p));
    return *reinterpret_cast<T*>(&v);
  } else if constexpr (sizeof(T) == 2) {
    unsigned short v = __ldcg(reinterpret_cast<const unsigned short*>(p));
    return *reinterpret_cast<T*>(&v);
  } else {
    unsigned char v = __ldcg(reinterpret_cast<const unsigned char*>(p));
    return *reinterpret_cast<T*>(&v);
  }
}

// 16 bytes of elements, moved as one vector.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kElems = 16 / sizeof(T);
  T e[kElems];
};

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

struct CudaBlock {
  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ size_t tid() const { return threadIdx.x; }
  __device__ size_t nthreads() const { return blockDim.x; }
  // An LL unit {data, flag, data, flag} moves as one 16-byte access, so a
  // reader that sees both flags sees the data stored with them.
  __device__ void llStore(char* unit, uint64_t payload, uint32_t flag) const {
    uint32_t lo = static_cast<uint32_t>(payload), hi = static_cast<uint32_t>(payload >> 32);
    asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(unit), "r"(lo), "r"(flag), "r"(hi),
                 "r"(flag)
                 : "memory");
  }
  __device__ bool llLoad(const char* unit, uint32_t flag, uint64_t* payload) const {
    uint32_t lo, f0, hi, f1;
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(lo), "=r"(f0), "=r"(hi), "=r"(f1)
                 : "l"(unit)
                 : "memory");
    if (f0 != flag || f1 != flag) return false;
    *payload = (static_cast<uint64_t>(hi) << 32) | lo;
    return true;
  }
  __device__ bool allAgree(bool ok) const { return __syncthreads_and(ok) != 0; }
  __device__ void sync() const { __syncthreads(); }
  __device__ void pause() const { __nanosleep(100); }
  __device__ uint64_t loadAcquire(const uint64_t* p) const {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ void publish(uint64_t* p, uint64_t v) const {
    __threadfence_system();  // the block's stores (ordered before by the barrier) first
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  __device__ void fenceSystem() const { __threadfence_system(); }
  __device__ SlotMeta loadMeta(const SlotMeta* m) const {
    SlotMeta out;
    const volatile uint64_t* src = reinterpret_cast<const volatile uint64_t*>(m);
    uint64_t* dst = reinterpret_cast<uint64_t*>(&out);
    for (int i = 0; i < 3; ++i) dst[i] = src[i];
    return out;
  }
  __device__ void storeMeta(SlotMeta* m, const SlotMeta& v) const {
    volatile uint64_t* dst = reinterpret_cast<volatile uint64_t*>(m);
    const uint64_t* src = reinterpret_cast<const uint64_t*>(&v);
    for (int i = 0; i < 3; ++i) dst[i] = src[i];
  }
  __device__ bool claimError(int32_t* error, int32_t kind) const {
    return atomicCAS_system(error, static_cast<int32_t>(kDeviceOk), kind) == kDeviceOk;
  }
  __device__ uint64_t nowNs() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }

  // Threads take 16-byte packs in turn (coalesced), kUnroll at a time so
  // several loads are in flight per thread (one at a time left a block near
  // 7 GB/s on an H100), then single packs, then single elements for the tail
  // or for buffers that are not 16-byte aligned.
  static constexpr int kUnroll = 4;

  template <typename T, typename Op, bool Pre, bool Post>
  __device__ void copyLoop(const Op& op, const T* src, T* dst0, T* dst1, size_t n, bool srcIsSlot) const {
    size_t done = 0;
    if (aligned16(src) && aligned16(dst0) && (!dst1 || aligned16(dst1))) {
      using P = Pack<T>;
      const size_t packs = n / P::kElems;
      const P* s = reinterpret_cast<const P*>(src);
      P* d0 = reinterpret_cast<P*>(dst0);
      P* d1 = reinterpret_cast<P*>(dst1);
      const size_t stride = blockDim.x, wide = packs / (stride * kUnroll) * (stride * kUnroll);
      for (size_t base = threadIdx.x; base < wide; base += stride * kUnroll) {
        P v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = srcIsSlot ? loadFresh(s + base + u * stride) : s[base + u * stride];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
          for (int j = 0; j < P::kElems; ++j) v[u].e[j] = copyOne<T, Op, Pre, Post>(op, v[u].e[j]);
          d0[base + u * stride] = v[u];
          if (d1) d1[base + u * stride] = v[u];
        }
      }
      for (size_t i = wide + threadIdx.x; i < packs; i += stride) {
        P v = srcIsSlot ? loadFresh(s + i) : s[i];
#pragma unroll
        for (int j = 0; j < P::kElems; ++j) v.e[j] = copyOne<T, Op, Pre, Post>(op, v.e[j]);
        d0[i] = v;
        if (d1) d1[i] = v;
      }
      done = packs * P::kElems;
    }
    for (size_t i = done + threadIdx.x; i < n; i += blockDim.x) {
      T v = copyOne<T, Op, Pre, Post>(op, srcIsSlot ? loadFresh(src + i) : src[i]);
      dst0[i] = v;
      if (dst1) dst1[i] = v;
    }
  }

  template <typename T, typename Op, bool Pre, bool Post, bool LocalFirst>
  __device__ void reduceLoop(const Op& op, const T* received, const T* local, T* dst0, T* dst1, size_t n) const {
    size_t done = 0;
    if (aligned16(received) && aligned16(local) && aligned16(dst0) && (!dst1 || aligned16(dst1))) {
      using P = Pack<T>;
      const size_t packs = n / P::kElems;
      const P* rv = reinterpret_cast<const P*>(received);
      const P* lv = reinterpret_cast<const P*>(local);
      P* d0 = reinterpret_cast<P*>(dst0);
      P* d1 = reinterpret_cast<P*>(dst1);
      const size_t stride = blockDim.x, wide = packs / (stride * kUnroll) * (stride * kUnroll);
      for (size_t base = threadIdx.x; base < wide; base += stride * kUnroll) {
        P r[kUnroll], l[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          r[u] = loadFresh(rv + base + u * stride);
          l[u] = lv[base + u * stride];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
          for (int j = 0; j < P::kElems; ++j)
            r[u].e[j] = reduceOne<T, Op, Pre, Post, LocalFirst>(op, r[u].e[j], l[u].e[j]);
          d0[base + u * stride] = r[u];
          if (d1) d1[base + u * stride] = r[u];
        }
      }
      for (size_t i = wide + threadIdx.x; i < packs; i += stride) {
        P r = loadFresh(rv + i);
        P l = lv[i];
#pragma unroll
        for (int j = 0; j < P::kElems; ++j) r.e[j] = reduceOne<T, Op, Pre, Post, LocalFirst>(op, r.e[j], l.e[j]);
        d0[i] = r;
        if (d1) d1[i] = r;
      }
      done = packs * P::kElems;
    }
    for (size_t i = done + threadIdx.x; i < n; i += blockDim.x) {
      T v = reduceOne<T, Op, Pre, Post, LocalFirst>(op, loadFresh(received + i), local[i]);
      dst0[i] = v;
      if (dst1) dst1[i] = v;
    }
  }

  template <typename T, typename Op>
  __device__ void copy(const Op& op, bool pre, bool post, const T* src, T* dst0, T* dst1, size_t n,
                       bool srcIsSlot) const {
    if (pre && post) copyLoop<T, Op, true, true>(op, src, dst0, dst1, n, srcIsSlot);
    else if (pre) copyLoop<T, Op, true, false>(op, src, dst0, dst1, n, srcIsSlot);
    else if (post) copyLoop<T, Op, false, true>(op, src, dst0, dst1, n, srcIsSlot);
    else copyLoop<T, Op, false, false>(op, src, dst0, dst1, n, srcIsSlot);
  }
  template <typename T, typename Op, bool LocalFirst>
  __device__ void reduce(const Op& op, bool pre, bool post, const T* received, const T* local, T* dst0, T* dst1,
                         size_t n) const {
    if (pre && post) reduceLoop<T, Op, true, true, LocalFirst>(op, received, local, dst0, dst1, n);
    else if (pre) reduceLoop<T, Op, true, false, LocalFirst>(op, received, local, dst0, dst1, n);
    else if (post) reduceLoop<T, Op, false, true, LocalFirst>(op, received, local, dst0, dst1, n);
    else reduceLoop<T, Op, false, false, LocalFirst>(op, received, local, dst0, dst1, n);
  }
};

// __grid_constant__: the launch is read in place from the parameter space
// (the block indexes its calls at run time), not copied per thread.
template <typename T, typename Op>
__global__ void __launch_bounds__(kKernelThreads) collectiveKernel(const __grid_constant__ DeviceLaunch launch, Op op) {
  CudaBlock ctx;
  runBlock<T, Op>(ctx, launch, static_cast<int>(blockIdx.x), op);
}

}  // namespace

int launchCollectiveKernel(const DeviceLaunch& launch, cudaStream_t stream) {
  if (launch.nblocks == 0) return 0;
  cudaError_t err = cudaSuccess;
  ncclResult_t r = visitCallOp(launch.calls[0], [&](auto op) {
    using Op = decltype(op);
    // cudaLaunchKernel returns this launch's own status; cudaGetLastError
    // after <<<>>> would also report a stale non-sticky error of the thread
    // (a cudaEventQuery's cudaErrorNotReady) as a failed launch.
    void* args[] = {const_cast<DeviceLaunch*>(&launch), &op};
    err = cudaLaunchKernel(reinterpret_cast<const void*>(&collectiveKernel<typename Op::Elem, Op>),
                           dim3(launch.nblocks), dim3(kKernelThreads), args, 0, stream);
    return ncclSuccess;
  });
  if (r != ncclSuccess) return -1;
  return static_cast<int>(err);
}

}  // namespace gyre
