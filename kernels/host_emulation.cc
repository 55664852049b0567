#include "kernels/host_emulation.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "kernels/direct_work.h"
#include "kernels/lane_loop.h"
#include "kernels/op_dispatch.h"

namespace gyre {
namespace {

// A block of one thread: barriers are no-ops and the element loops are the
// host executor's own.
struct HostBlock {
  bool leader() const { return true; }
  size_t tid() const { return 0; }
  size_t nthreads() const { return 1; }
  // An LL unit as two 8-byte words {data, flag}, each stored and loaded whole.
  void llStore(char* unit, uint64_t payload, uint32_t flag) const {
    auto* w = reinterpret_cast<uint64_t*>(unit);
    __atomic_store_n(&w[0], (uint64_t{flag} << 32) | (payload & 0xffffffffu), __ATOMIC_RELAXED);
    __atomic_store_n(&w[1], (uint64_t{flag} << 32) | (payload >> 32), __ATOMIC_RELAXED);
  }
  bool llLoad(const char* unit, uint32_t flag, uint64_t* payload) const {
    auto* w = reinterpret_cast<const uint64_t*>(unit);
    uint64_t lo = __atomic_load_n(&w[0], __ATOMIC_RELAXED), hi = __atomic_load_n(&w[1], __ATOMIC_RELAXED);
    if ((lo >> 32) != flag || (hi >> 32) != flag) return false;
    *payload = (hi << 32) | (lo & 0xffffffffu);
    return true;
  }
  bool allAgree(bool ok) const { return ok; }
  void sync() const {}
  void pause() const { std::this_thread::yield(); }
  uint64_t loadAcquire(const uint64_t* p) const { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  void publish(uint64_t* p, uint64_t v) const { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  void fenceSystem() const { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
  SlotMeta loadMeta(const SlotMeta* m) const { return *m; }  // ordered by the acquire of tail
  void storeMeta(SlotMeta* m, const SlotMeta& v) const { *m = v; }  // ordered by the release of tail
  bool claimError(int32_t* error, int32_t kind) const {
    int32_t expected = kDeviceOk;
    return __atomic_compare_exchange_n(error, &expected, kind, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  uint64_t nowNs() const {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  }

  template <typename T, typename Op>
  void copy(const Op& op, bool pre, bool post, const T* src, T* dst0, T* dst1, size_t n, bool) const {
    if (pre && post) copyElements<T, Op, true, true>(op, src, dst0, dst1, n);
    else if (pre) copyElements<T, Op, true, false>(op, src, dst0, dst1, n);
    else if (post) copyElements<T, Op, false, true>(op, src, dst0, dst1, n);
    else copyElements<T, Op, false, false>(op, src, dst0, dst1, n);
  }
  template <typename T, typename Op, bool LocalFirst>
  void reduce(const Op& op, bool pre, bool post, const T* received, const T* local, T* dst0, T* dst1,
              size_t n) const {
    if (pre && post) reduceElements<T, Op, true, true, LocalFirst>(op, received, local, dst0, dst1, n);
    else if (pre) reduceElements<T, Op, true, false, LocalFirst>(op, received, local, dst0, dst1, n);
    else if (post) reduceElements<T, Op, false, true, LocalFirst>(op, received, local, dst0, dst1, n);
    else reduceElements<T, Op, false, false, LocalFirst>(op, received, local, dst0, dst1, n);
  }
};

}  // namespace

ncclResult_t runLaunchOnHostThreads(const DeviceLaunch& launch) {
  return visitCallOp(launch.calls[0], [&](auto op) {
    using Op = decltype(op);
    std::vector<std::thread> blocks;
    for (int b = 1; b < launch.nblocks; ++b)
      blocks.emplace_back([&, b] {
        HostBlock ctx;
        runBlock<typename Op::Elem, Op>(ctx, launch, b, op);
      });
    if (launch.nblocks > 0) {
      HostBlock ctx;
      runBlock<typename Op::Elem, Op>(ctx, launch, 0, op);
    }
    for (std::thread& t : blocks) t.join();
    return ncclSuccess;
  });
}

}  // namespace gyre

namespace gyre {

ncclResult_t runDirectOnHost(const DirectCall& call) {
  if (call.abort && *call.abort) return ncclSuccess;
  return visitCallOp(call, [&](auto op) {
    using Op = decltype(op);
    loadScalar(op, call.scalarPtr);
    directElements<typename Op::Elem, Op>(call, op, 0, 1);
    return ncclSuccess;
  });
}

}  // namespace gyre
