/* nccl_device/coop.h — the groups of threads that call device-API functions
 * together (NCCL's ncclCoop* types: a subset of CUDA's cooperative groups:
 * thread_rank(), size(), num_threads(), sync()).
 *
 * In device code they are what their names say. Compiled for the host (a
 * test emulating a kernel with one host thread per block) each is a group
 * of one thread: rank 0, size 1, sync() does nothing, a broadcast returns
 * the value given. Below them: ncclCoopAny (any group, chosen at run time),
 * the facts about a group (lane mask, one thread, within a warp), the
 * coalesced part of a warp, and ncclCoopBcast. */
#ifndef GYRE_NCCL_DEVICE_COOP_H_
#define GYRE_NCCL_DEVICE_COOP_H_

#include "core.h"

#ifdef __cplusplus

#include <new>

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
 * (0..14) no other span in use at the same time has. The span syncs on
 * named barrier 1 + id: PTX has barriers 0..15 and 0 is __syncthreads',
 * so an id past 14 traps instead of naming a barrier that does not exist. */
struct ncclCoopWarpSpan {
  uint32_t warp0 : 8, nWarps : 8, id : 8;
  GYRE_DEVICE_FN constexpr ncclCoopWarpSpan(int first, int count, int spanId)
      : warp0(uint32_t(first)), nWarps(uint32_t(count)), id(uint32_t(spanId)) {}
  GYRE_DEVICE_FN int thread_rank() const { return GYRE_ON_DEVICE(int(threadIdx.x) - 32 * int(warp0), 0); }
  GYRE_DEVICE_FN int size() const { return GYRE_ON_DEVICE(32 * int(nWarps), 1); }
  GYRE_DEVICE_FN int num_threads() const { return size(); }
  GYRE_DEVICE_FN void sync() {
#if defined(__CUDA_ARCH__)
    if (id > 14) __trap();
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

/* ---- Any group, chosen at run time -------------------------------------------
 * ncclCoopAny holds any of the groups above (or a user's type with the same
 * four members, at most 16 bytes) and forwards to it, so one non-template
 * function can serve several kinds of group. */
struct ncclCoopAny {
  struct Storage {
    alignas(alignof(void*)) char space[16];
  };
  Storage storage;
  int (*rankOf)(void const*);
  int (*sizeOf)(void const*);
  void (*syncOf)(void*);

  ncclCoopAny() = default;
  ncclCoopAny(ncclCoopAny const&) = default;
  template <typename Impl>
  GYRE_DEVICE_FN ncclCoopAny(Impl impl)
      : rankOf(&rankThunk<Impl>), sizeOf(&sizeThunk<Impl>), syncOf(&syncThunk<Impl>) {
    static_assert(sizeof(Impl) <= sizeof(Storage) && alignof(Impl) <= alignof(Storage),
                  "ncclCoopAny holds groups of at most 16 bytes, aligned as a pointer");
    ::new (static_cast<void*>(storage.space)) Impl(impl);
  }
  GYRE_DEVICE_FN int thread_rank() const { return rankOf(storage.space); }
  GYRE_DEVICE_FN int size() const { return sizeOf(storage.space); }
  GYRE_DEVICE_FN int num_threads() const { return sizeOf(storage.space); }
  GYRE_DEVICE_FN void sync() { syncOf(storage.space); }

 private:
  template <typename Impl>
  GYRE_DEVICE_FN static int rankThunk(void const* o) { return static_cast<Impl const*>(o)->thread_rank(); }
  template <typename Impl>
  GYRE_DEVICE_FN static int sizeThunk(void const* o) { return static_cast<Impl const*>(o)->size(); }
  template <typename Impl>
  GYRE_DEVICE_FN static void syncThunk(void* o) { static_cast<Impl*>(o)->sync(); }
};

/* ---- Facts about a group ------------------------------------------------------
 * The lanes of this warp a group uses (all for groups wider than a warp),
 * whether it is one thread, whether it lies within one warp. */
template <int n>
GYRE_DEVICE_FN uint32_t ncclCoopGetLaneMask(ncclCoopTile<n> coop) { return coop.laneMask(); }
GYRE_DEVICE_FN uint32_t ncclCoopGetLaneMask(ncclCoopLanes coop) { return coop.lmask; }
GYRE_DEVICE_FN uint32_t ncclCoopGetLaneMask(ncclCoopWarpSpan) { return ~0u; }
GYRE_DEVICE_FN uint32_t ncclCoopGetLaneMask(ncclCoopCta) { return ~0u; }

template <int n>
GYRE_DEVICE_FN constexpr bool ncclCoopIsThread(ncclCoopTile<n>) { return n == 1; }
GYRE_DEVICE_FN constexpr bool ncclCoopIsThread(ncclCoopLanes) { return false; }
GYRE_DEVICE_FN constexpr bool ncclCoopIsThread(ncclCoopWarpSpan) { return false; }
GYRE_DEVICE_FN constexpr bool ncclCoopIsThread(ncclCoopCta) { return false; }

template <int n>
GYRE_DEVICE_FN constexpr bool ncclCoopWithinWarp(ncclCoopTile<n>) { return true; }
GYRE_DEVICE_FN constexpr bool ncclCoopWithinWarp(ncclCoopLanes) { return true; }
GYRE_DEVICE_FN constexpr bool ncclCoopWithinWarp(ncclCoopWarpSpan) { return false; }
GYRE_DEVICE_FN constexpr bool ncclCoopWithinWarp(ncclCoopCta) { return false; }

/* The lanes of this warp that are running here, as a group; and, within a
 * group, the part of this warp that may act collectively. */
GYRE_DEVICE_FN ncclCoopLanes ncclCoopCoalesced() { return ncclCoopLanes{GYRE_ON_DEVICE(__activemask(), 1u)}; }
template <typename Coop>
GYRE_DEVICE_FN ncclCoopWarp ncclCoopCoalesced(Coop) { return ncclCoopWarp(); }
GYRE_DEVICE_FN ncclCoopLanes ncclCoopCoalesced(ncclCoopLanes coop) { return coop; }
template <int n>
GYRE_DEVICE_FN ncclCoopTile<n> ncclCoopCoalesced(ncclCoopTile<n> coop) { return coop; }

/* ---- Broadcast within a group ------------------------------------------------
 * Every thread of the group gets `value` of the group's thread `root`.
 * Within a warp by shuffles; across warps through shared memory (one slot
 * per warp-span id, one for the CTA), so entrySync orders the write after
 * any earlier broadcast's reads. */
namespace gyre_device {
template <typename T, typename Shuffle>
GYRE_DEVICE_FN T shuffleWords(T value, Shuffle shfl) {
  constexpr int n = int((sizeof(T) + 3) / 4);
  union {
    uint32_t u[n];
    T v;
  } x;
  x.v = value;
  for (int i = 0; i < n; ++i) x.u[i] = shfl(x.u[i]);
  return x.v;
}
#if defined(__CUDACC__)
__device__ inline ulong2* bcastSlot(int slot) {
  __shared__ ulong2 slots[16];  // 15 warp-span ids, then the CTA
  return &slots[slot];
}
#endif
template <typename T, typename Coop>
GYRE_DEVICE_FN T bcastShared(Coop coop, T value, int root, bool entrySync, int slot) {
  static_assert(sizeof(T) <= 16, "a group broadcast carries at most 16 bytes");
#if defined(__CUDA_ARCH__)
  if (entrySync) coop.sync();
  if (coop.thread_rank() == root) *reinterpret_cast<T*>(bcastSlot(slot)) = value;
  coop.sync();
  return *reinterpret_cast<T*>(bcastSlot(slot));
#else
  (void)coop, (void)root, (void)entrySync, (void)slot;
  return value;
#endif
}
}  // namespace gyre_device

template <int n, typename T>
GYRE_DEVICE_FN T ncclCoopBcast(ncclCoopTile<n> coop, T value, int root, bool entrySync = true) {
  (void)entrySync;
#if defined(__CUDA_ARCH__)
  // The tile's own lanes: a mask naming the whole warp would wait for lanes
  // of other tiles that need not reach this broadcast.
  const uint32_t mask = coop.laneMask();
  return gyre_device::shuffleWords(value, [&](uint32_t w) { return __shfl_sync(mask, w, root, n); });
#else
  (void)coop, (void)root;
  return value;
#endif
}
template <typename T>
GYRE_DEVICE_FN T ncclCoopBcast(ncclCoopLanes coop, T value, int root, bool entrySync = true) {
  (void)entrySync;
#if defined(__CUDA_ARCH__)
  const uint32_t mask = coop.lmask;
  const int lane = int(__fns(mask, 0, 1 + root));  // the root'th set lane
  return gyre_device::shuffleWords(value, [&](uint32_t w) { return __shfl_sync(mask, w, lane); });
#else
  (void)coop, (void)root;
  return value;
#endif
}
template <typename T>
GYRE_DEVICE_FN T ncclCoopBcast(ncclCoopWarpSpan coop, T value, int root, bool entrySync = true) {
  return gyre_device::bcastShared(coop, value, root, entrySync, int(coop.id));
}
template <typename T>
GYRE_DEVICE_FN T ncclCoopBcast(ncclCoopCta coop, T value, int root, bool entrySync = true) {
  return gyre_device::bcastShared(coop, value, root, entrySync, 15);
}

#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_COOP_H_ */
