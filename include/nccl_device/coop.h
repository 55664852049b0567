/* nccl_device/coop.h — the groups of threads that call device-API functions
 * together (NCCL's ncclCoop* types: a subset of CUDA's cooperative groups:
 * thread_rank(), size(), num_threads(), sync()).
 *
 * In device code they are what their names say. Compiled for the host (a
 * test emulating a kernel with one host thread per block) each is a group
 * of one thread: rank 0, size 1, sync() does nothing. */
#ifndef GYRE_NCCL_DEVICE_COOP_H_
#define GYRE_NCCL_DEVICE_COOP_H_

#include "core.h"

#ifdef __cplusplus

#if defined(__CUDA_ARCH__)
#define GYRE_ON_DEVICE(deviceExpr, hostExpr) (deviceExpr)
#else
#define GYRE_ON_DEVICE(deviceExpr, hostExpr) (hostExpr)
#endif

/* An aligned power-of-two set of threads of one warp. */
template <int nThreadsPow2>
struct ncclCoopTile {
  static_assert(nThreadsPow2 > 0 && nThreadsPow2 <= 32 && (nThreadsPow2 & (nThreadsPow2 - 1)) == 0,
                "a tile is 1, 2, 4, 8, 16 or 32 threads");
  GYRE_DEVICE_FN int thread_rank() const { return GYRE_ON_DEVICE(int(threadIdx.x % nThreadsPow2), 0); }
  GYRE_DEVICE_FN int size() const { return GYRE_ON_DEVICE(nThreadsPow2, 1); }
  GYRE_DEVICE_FN int num_threads() const { return size(); }
  GYRE_DEVICE_FN uint32_t laneMask() const {
    return GYRE_ON_DEVICE((~0u >> (32 - nThreadsPow2)) << ((threadIdx.x % 32) & ~(nThreadsPow2 - 1)), 1u);
  }
  GYRE_DEVICE_FN void sync() {
#if defined(__CUDA_ARCH__)
    if (nThreadsPow2 > 1) __syncwarp(laneMask());
#endif
  }
};
typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

/* Some lanes of this warp, named by a mask. */
struct ncclCoopLanes {
  uint32_t lmask;
  GYRE_DEVICE_FN constexpr ncclCoopLanes(uint32_t mask = ~0u) : lmask(mask) {}
  GYRE_DEVICE_FN int thread_rank() const {
    return GYRE_ON_DEVICE(__popc(lmask & ((1u << (threadIdx.x % 32)) - 1)), 0);
  }
  GYRE_DEVICE_FN int size() const { return GYRE_ON_DEVICE(__popc(lmask), 1); }
  GYRE_DEVICE_FN int num_threads() const { return size(); }
  GYRE_DEVICE_FN void sync() {
#if defined(__CUDA_ARCH__)
    __syncwarp(lmask);
#endif
  }
};

/* Consecutive warps warp0 .. warp0 + nWarps - 1 of the block, with an id
 * (0..15) no other span in use at the same time has. */
struct ncclCoopWarpSpan {
  uint32_t warp0 : 8, nWarps : 8, id : 8;
  GYRE_DEVICE_FN constexpr ncclCoopWarpSpan(int first, int count, int spanId)
      : warp0(uint32_t(first)), nWarps(uint32_t(count)), id(uint32_t(spanId)) {}
  GYRE_DEVICE_FN int thread_rank() const { return GYRE_ON_DEVICE(int(threadIdx.x) - 32 * int(warp0), 0); }
  GYRE_DEVICE_FN int size() const { return GYRE_ON_DEVICE(32 * int(nWarps), 1); }
  GYRE_DEVICE_FN int num_threads() const { return size(); }
  GYRE_DEVICE_FN void sync() {
#if defined(__CUDA_ARCH__)
    __barrier_sync_count(1 + id, 32 * nWarps);
#endif
  }
};

/* The whole thread block. */
struct ncclCoopCta {
  GYRE_DEVICE_FN int thread_rank() const { return GYRE_ON_DEVICE(int(threadIdx.x), 0); }
  GYRE_DEVICE_FN int size() const { return GYRE_ON_DEVICE(int(blockDim.x), 1); }
  GYRE_DEVICE_FN int num_threads() const { return size(); }
  GYRE_DEVICE_FN void sync() {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};

#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_COOP_H_ */
