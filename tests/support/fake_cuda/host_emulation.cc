#include "tests/support/fake_cuda/host_emulation.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/kernels/direct_work.h"
#include "src/kernels/flag_loop.h"
#include "src/kernels/lane_loop.h"
#include "src/kernels/pair_copy_loop.h"
#include "src/kernels/primitives/op_dispatch.h"

namespace gyre {
namespace {

// ThreadSanitizer sees one process. A kernel's lanes also order each other
// through peers in other processes: a tree leaf's up lane sends its input to
// the parent, the parent's result comes back to the leaf's down lane, and
// only then does that lane write over the input (in place). Each link is a
// release and an acquire on a FIFO word, but the middle ones happen in the
// peer, so TSan sees the two lanes touch the element unordered and reports
// a race that cannot happen. Every FIFO publish is therefore also a release,
// and every acquire of one an acquire, of one clock standing in for all
// other processes. The price: two lanes of this process ordered only by
// words of different connections look ordered too, so a race between them
// can go unreported; races within a block, and with the host's threads,
// are seen as before.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
char peersClock;
void releaseToPeers() { __tsan_release(&peersClock); }
void acquireFromPeers() { __tsan_acquire(&peersClock); }
#else
void releaseToPeers() {}
void acquireFromPeers() {}
#endif

uint64_t steadyNowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

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
    releaseToPeers();
    auto* w = reinterpret_cast<uint64_t*>(unit);
    __atomic_store_n(&w[0], (uint64_t{flag} << 32) | (payload & 0xffffffffu), __ATOMIC_RELAXED);
    __atomic_store_n(&w[1], (uint64_t{flag} << 32) | (payload >> 32), __ATOMIC_RELAXED);
  }
  bool llLoad(const char* unit, uint32_t flag, uint64_t* payload) const {
    auto* w = reinterpret_cast<const uint64_t*>(unit);
    uint64_t lo = __atomic_load_n(&w[0], __ATOMIC_RELAXED), hi = __atomic_load_n(&w[1], __ATOMIC_RELAXED);
    if ((lo >> 32) != flag || (hi >> 32) != flag) return false;
    acquireFromPeers();
    *payload = (hi << 32) | (lo & 0xffffffffu);
    return true;
  }
  bool allAgree(bool ok) const { return barrier ? barrier->arrive(ok) : ok; }
  void sync() const {
    if (barrier) barrier->arrive(true);
  }
  void pause() const { std::this_thread::yield(); }
  uint64_t loadAcquire(const uint64_t* p) const {
    const uint64_t v = __atomic_load_n(p, __ATOMIC_ACQUIRE);
    acquireFromPeers();
    return v;
  }
  void publish(uint64_t* p, uint64_t v) const {
    releaseToPeers();
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
  }
  void fenceSystem() const { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
  SlotMeta loadMeta(const SlotMeta* m) const { return *m; }  // ordered by the acquire of tail
  void storeMeta(SlotMeta* m, const SlotMeta& v) const { *m = v; }  // ordered by the release of tail
  bool claimError(int32_t* error, int32_t kind) const {
    int32_t expected = kDeviceOk;
    return __atomic_compare_exchange_n(error, &expected, kind, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
  }
  uint64_t nowNs() const { return steadyNowNs(); }

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
  // postWords stores the abort word from another thread: an atomic load, as
  // the GPU's volatile one is to the device.
  if (call.abort && __atomic_load_n(call.abort, __ATOMIC_ACQUIRE)) return ncclSuccess;
  return visitCallOp(call, [&](auto op) {
    using Op = decltype(op);
    SourceScalars scalars;
    for (int k = 0; k < call.nsrc; ++k) resolveSourceScalar(op, call, k, scalars);
    directElements<typename Op::Elem, Op>(call, op, scalars, 0, 1);
    return ncclSuccess;
  });
}

namespace {

// The flag kernel's thread (src/kernels/flag_loop.h) on a host thread: the
// host's steady clock for %globaltimer, a short sleep for __nanosleep.
struct HostFlagThread {
  uint32_t load(const uint32_t* flag) const { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }
  void store(uint32_t* flag, uint32_t value) const { __atomic_store_n(flag, value, __ATOMIC_RELEASE); }
  void fenceSystem() const { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
  void pause() const { std::this_thread::sleep_for(std::chrono::microseconds(20)); }
  uint64_t nowNs() const { return steadyNowNs(); }
};

// One thread of a point-to-point kernel's block (src/kernels/pair_copy_loop.h).
struct HostPairBlock : HostFlagThread {
  size_t blockIndex = 0, thread = 0, threads = 1;
  uint32_t grid = 1;
  BlockBarrier* barrier = nullptr;  // null: a block of one thread

  bool leader() const { return thread == 0; }
  size_t tid() const { return thread; }
  size_t nthreads() const { return threads; }
  size_t block() const { return blockIndex; }
  uint32_t blocks() const { return grid; }
  bool allAgree(bool ok) const { return barrier ? barrier->arrive(ok) : ok; }
  void sync() const {
    if (barrier) barrier->arrive(true);
  }
  void fence() const { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
  uint32_t arrive(uint32_t* count) const { return __atomic_fetch_add(count, 1u, __ATOMIC_ACQ_REL); }
};

}  // namespace

void runFlagOpsOnHost(const FlagOps& ops) { runFlagOps(HostFlagThread{}, ops); }

void runPairCopiesOnHost(const PairCopyWork& work, int blocks, int threadsPerBlock) {
  const uint32_t grid = blocks > 1 ? static_cast<uint32_t>(blocks) : 1;
  const size_t threads = threadsPerBlock > 1 ? static_cast<size_t>(threadsPerBlock) : 1;
  std::vector<std::unique_ptr<BlockBarrier>> barriers(grid);
  if (threads > 1)
    for (auto& barrier : barriers) barrier = std::make_unique<BlockBarrier>(threads);
  std::vector<std::thread> running;
  for (uint32_t b = 0; b < grid; ++b)
    for (size_t t = 0; t < threads; ++t)
      running.emplace_back([&, b, t] {
        HostPairBlock ctx;
        ctx.blockIndex = b;
        ctx.thread = t;
        ctx.threads = threads;
        ctx.grid = grid;
        ctx.barrier = barriers[b].get();
        runPairCopyBlock(ctx, work);
      });
  for (std::thread& t : running) t.join();
}

}  // namespace gyre
