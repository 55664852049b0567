#include "tests/support/fake_cuda/host_emulation.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/kernels/direct_work.h"
#include "src/kernels/lane_loop.h"
#include "src/kernels/primitives/op_dispatch.h"

namespace gyre {
namespace {

// Where the threads of one emulated block meet (__syncthreads, and
// __syncthreads_and for allAgree). Blocking, not spinning: tests run many
// blocks on two cores. The mutex orders each thread's writes before the
// barrier against every thread's reads after it, as __syncthreads does.
class BlockBarrier {
 public:
  explicit BlockBarrier(size_t threads) : threads_(threads) {}
  // Whether every thread of the block arrived with `ok`.
  bool arrive(bool ok) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    allOk_ = allOk_ && ok;
    if (++arrived_ == threads_) {
      result_ = allOk_;  // read by this round's waiters before the next round can end
      arrived_ = 0;
      allOk_ = true;
      ++generation_;
      wake_.notify_all();
      return result_;
    }
    wake_.wait(lock, [&] { return generation_ != generation; });
    return result_;
  }

 private:
  const size_t threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  size_t arrived_ = 0;
  uint64_t generation_ = 0;
  bool allOk_ = true, result_ = true;
};

// One thread of an emulated block: thread 0 leads, element loops take the
// thread's contiguous share of a step (the host executor's own loops), and
// with one thread per block the barriers are no-ops.
struct HostBlock {
  size_t thread = 0, threads = 1;
  BlockBarrier* barrier = nullptr;  // null: a block of one thread

  bool leader() const { return thread == 0; }
  size_t tid() const { return thread; }
  size_t nthreads() const { return threads; }
  // [first, first + n) of `total` elements is this thread's share.
  void share(size_t total, size_t* first, size_t* n) const {
    *first = total * thread / threads;
    *n = total * (thread + 1) / threads - *first;
  }
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
  bool allAgree(bool ok) const { return barrier ? barrier->arrive(ok) : ok; }
  void sync() const {
    if (barrier) barrier->arrive(true);
  }
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
  void copy(const Op& op, bool pre, bool post, const T* src, T* dst0, T* dst1, size_t total, bool) const {
    size_t first = 0, n = 0;
    share(total, &first, &n);
    src += first;
    dst0 += first;
    if (dst1) dst1 += first;
    if (pre && post) copyElements<T, Op, true, true>(op, src, dst0, dst1, n);
    else if (pre) copyElements<T, Op, true, false>(op, src, dst0, dst1, n);
    else if (post) copyElements<T, Op, false, true>(op, src, dst0, dst1, n);
    else copyElements<T, Op, false, false>(op, src, dst0, dst1, n);
  }
  template <typename T, typename Op, bool LocalFirst>
  void reduce(const Op& op, bool pre, bool post, const T* received, const T* local, T* dst0, T* dst1,
              size_t total) const {
    size_t first = 0, n = 0;
    share(total, &first, &n);
    received += first;
    local += first;
    dst0 += first;
    if (dst1) dst1 += first;
    if (pre && post) reduceElements<T, Op, true, true, LocalFirst>(op, received, local, dst0, dst1, n);
    else if (pre) reduceElements<T, Op, true, false, LocalFirst>(op, received, local, dst0, dst1, n);
    else if (post) reduceElements<T, Op, false, true, LocalFirst>(op, received, local, dst0, dst1, n);
    else reduceElements<T, Op, false, false, LocalFirst>(op, received, local, dst0, dst1, n);
  }
};

}  // namespace

ncclResult_t runLaunchOnHostThreads(const DeviceLaunch& launch, int threadsPerBlock) {
  const size_t threads = threadsPerBlock > 1 ? static_cast<size_t>(threadsPerBlock) : 1;
  return visitCallOp(launch.calls[0], [&](auto op) {
    using Op = decltype(op);
    std::vector<std::unique_ptr<BlockBarrier>> barriers(launch.nblocks);
    if (threads > 1)
      for (auto& barrier : barriers) barrier = std::make_unique<BlockBarrier>(threads);
    std::vector<std::thread> running;
    for (int b = 0; b < launch.nblocks; ++b)
      for (size_t t = 0; t < threads; ++t)
        running.emplace_back([&, b, t, barrier = barriers[b].get()] {
          HostBlock ctx{t, threads, barrier};
          runBlock<typename Op::Elem, Op>(ctx, launch, b, op);
        });
    for (std::thread& t : running) t.join();
    return ncclSuccess;
  });
}

}  // namespace gyre

namespace gyre {

ncclResult_t runDirectOnHost(const DirectCall& call) {
  if (call.abort && *call.abort) return ncclSuccess;
  return visitCallOp(call, [&](auto op) {
    using Op = decltype(op);
    SourceScalars scalars;
    for (int k = 0; k < call.nsrc; ++k) resolveSourceScalar(op, call, k, scalars);
    directElements<typename Op::Elem, Op>(call, op, scalars, 0, 1);
    return ncclSuccess;
  });
}

namespace {

// The flag kernel's wait (flag_kernel.cu's waitFlag), with the host's
// steady clock for %globaltimer: false when it stopped (abort, or this or
// another wait of the communicator timed out, reported as the kernel does).
bool waitFlagOnHost(const FlagOps& ops, const FlagOp& op) {
  const auto start = std::chrono::steady_clock::now();
  while (!flagReached(__atomic_load_n(op.flag, __ATOMIC_ACQUIRE), op.value)) {
    if (flagWaitStopped(ops)) return false;
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    if (ops.timeoutNs && static_cast<uint64_t>(waited.count()) > ops.timeoutNs) {
      if (ops.stopOnTimeout) __atomic_store_n(ops.stopOnTimeout, 1u, __ATOMIC_RELEASE);
      if (ops.timedOut) {
        ops.timedOut->step = op.step;
        __atomic_store_n(&ops.timedOut->peerPlusOne, static_cast<uint32_t>(op.peer + 1), __ATOMIC_RELEASE);
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

}  // namespace

void runFlagOpsOnHost(const FlagOps& ops) {
  for (int i = 0; i < ops.n; ++i) {
    const FlagOp& op = ops.ops[i];
    if (op.kind == FlagOpKind::kWrite) {
      __atomic_store_n(op.flag, op.value, __ATOMIC_RELEASE);
      continue;
    }
    if (!waitFlagOnHost(ops, op)) return;
    if (op.kind == FlagOpKind::kWaitAndClear) __atomic_store_n(op.flag, 0u, __ATOMIC_RELEASE);
  }
}

namespace {

// The point-to-point kernel's wait (pair_copy_kernel.cu's waitSet): gives up
// on abort, on an earlier timeout of the communicator, or after timeoutNs,
// storing the peer's rank + 1 then.
bool waitPairFlagOnHost(const uint32_t* flag, const PairCopyWork& w, int32_t peer) {
  const auto start = std::chrono::steady_clock::now();
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) {
    if ((w.abort && *w.abort) || (w.timedOut && *w.timedOut)) return false;
    const auto waited = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
    if (w.timeoutNs && static_cast<uint64_t>(waited.count()) > w.timeoutNs) {
      if (w.timedOut) *w.timedOut = static_cast<uint32_t>(peer + 1);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

}  // namespace

void runPairCopiesOnHost(const PairCopyWork& w) {
  for (int i = 0; i < w.n; ++i)
    if (w.pairs[i].role == PairRole::kFirst) __atomic_store_n(&w.pairs[i].flags->ready, 1u, __ATOMIC_RELEASE);
  for (int i = 0; i < w.n; ++i) {
    const PairCopy& p = w.pairs[i];
    if (p.role != PairRole::kSecond) continue;
    if (!waitPairFlagOnHost(&p.flags->ready, w, p.peer)) return;
    if (p.bytes) memmove(p.dst, p.src, p.bytes);
    __atomic_store_n(&p.flags->ready, 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&p.flags->done, 1u, __ATOMIC_RELEASE);
  }
  for (int i = 0; i < w.n; ++i) {
    if (w.pairs[i].role != PairRole::kFirst) continue;
    if (!waitPairFlagOnHost(&w.pairs[i].flags->done, w, w.pairs[i].peer)) return;
    __atomic_store_n(&w.pairs[i].flags->done, 0u, __ATOMIC_RELEASE);
  }
}

}  // namespace gyre
