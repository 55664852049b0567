// The element loops a host lane runs over a step's elements, per element
// type and operator: copies and reductions between user buffers, FIFO
// slots and small stack blocks (src/kernels/primitives/reduce_copy.h does the
// arithmetic; the F16C float16 loops of half_simd.h where they apply), and
// the n-input reduction in rank order of the one-shot and single-copy
// steps. TypedLane (lane.h) owns one and decides which loop a step needs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>

#include "src/kernels/primitives/reduce_copy.h"
#include "src/kernels/primitives/reduce_op.h"
#include "src/host/half_simd.h"

namespace gyre {

// The F16C float16 loops (half_simd.h) for the operators they cover; false
// sends the caller to the portable loop.
template <typename Op>
bool reduceHalfFast(const Op&, bool, const Half*, const Half*, Half*, size_t) {
  return false;
}
inline bool reduceHalfFast(const OpSum<Half>&, bool, const Half* r, const Half* l, Half* d, size_t n) {
  return halfReduceSimd(HalfSimdOp::Sum, r, l, d, nullptr, n, nullptr);
}
inline bool reduceHalfFast(const OpProd<Half>&, bool, const Half* r, const Half* l, Half* d, size_t n) {
  return halfReduceSimd(HalfSimdOp::Prod, r, l, d, nullptr, n, nullptr);
}
inline bool reduceHalfFast(const OpPreMulSum<Half>& op, bool pre, const Half* r, const Half* l, Half* d, size_t n) {
  return halfReduceSimd(HalfSimdOp::Sum, r, l, d, nullptr, n, pre ? &op.scalar : nullptr);
}

template <typename T, typename Op>
struct ElementLoops {
  // Elements of a stack block (16 KiB, small enough to stay cache-resident).
  static constexpr size_t kBlockElems = (16 << 10) / sizeof(T);

  Op op;

  // `inDst`: accumulate in dst itself rather than in a stack block copied
  // to dst by memcpy, saving that copy. Only where nothing read later aliases
  // dst and no peer reads dst's lines (a fused loop's stores would wait for
  // each line to come back from the peer's cache; memcpy's do not).
  void reduceInRankOrder(int rank, int nranks, const T* const* inputs, bool pre, bool post, T* dst, size_t n,
                         bool inDst = false) const {
    alignas(64) T stackBlock[kBlockElems];
    for (size_t done = 0; done < n; done += kBlockElems) {
      size_t k = std::min(kBlockElems, n - done);
      T* block = inDst ? dst + done : stackBlock;
      // op(x0, x1): whichever is local takes the pre-op and keeps its side.
      bool last = nranks == 2;
      if (rank == 0) reduceInto<true>(pre, post && last, inputs[1] + done, inputs[0] + done, block, k);
      else reduceInto(rank == 1 && pre, post && last, inputs[0] + done, inputs[1] + done, block, k);
      for (int p = 2; p < nranks; ++p) {
        last = p == nranks - 1;
        if (p == rank) reduceInto(pre, post && last, block, inputs[p] + done, block, k);  // op(acc, local)
        else reduceInto<true>(false, post && last, inputs[p] + done, block, block, k);  // op(acc, received)
      }
      if (!inDst) memcpy(dst + done, block, k * sizeof(T));
    }
  }

  // Stores into a FIFO slot (the peer read it last) never come from a fused
  // element loop: that waits for cache-line ownership line by line
  // (out-of-place Broadcast and AllGather ran 3x slower than in place, a
  // 2-rank AllReduce of 1 MiB 227 instead of 80 us); memcpy's string stores do
  // not. So a result goes to the step's other destination, or to a small
  // cache-resident block, and memcpy takes it to the slot.

  // Into dst only; memmove, since a Copy step may be in place.
  void copyInto(bool pre, bool post, const T* src, T* dst, size_t n) const {
    if constexpr (std::is_same_v<Op, OpPreMulSum<Half>>)
      if (pre && !post && halfScaleSimd(src, dst, nullptr, n, op.scalar)) return;
    if (pre && post) copyElements<T, Op, true, true>(op, src, dst, nullptr, n);
    else if (pre) copyElements<T, Op, true, false>(op, src, dst, nullptr, n);
    else if (post) copyElements<T, Op, false, true>(op, src, dst, nullptr, n);
    else if (n) memmove(dst, src, n * sizeof(T));
  }

  // A zero-count call's buffers may be NULL, which memcpy and memmove may not
  // be given even for 0 bytes: no elements, no call.
  void copyToSlot(bool pre, bool post, const T* src, T* slot, size_t n) const {
    if (!pre && !post) {
      if (n) memcpy(slot, src, n * sizeof(T));
      return;
    }
    throughBlock(slot, n, [&](size_t done, T* block, size_t k) { copyInto(pre, post, src + done, block, k); });
  }

  void copyAndSend(bool pre, bool post, const T* src, T* dst, T* slot, size_t n) const {
    copyInto(pre, post, src, dst, n);
    if (n) memcpy(slot, dst, n * sizeof(T));
  }

  template <bool LocalFirst = false>
  void reduce(bool pre, bool post, const T* received, const T* local, T* dst, T* slot, size_t n) const {
    reduceInto<LocalFirst>(pre, post, received, local, dst, n);
    if (slot && n) memcpy(slot, dst, n * sizeof(T));
  }

  void reduceToSlot(bool pre, bool post, const T* received, const T* local, T* slot, size_t n) const {
    throughBlock(slot, n, [&](size_t done, T* block, size_t k) {
      reduceInto(pre, post, received + done, local + done, block, k);
    });
  }

  // Fills the slot block by block: produce(done, block, k) writes elements
  // [done, done + k) into the block, memcpy moves them on.
  template <typename Produce>
  static void throughBlock(T* slot, size_t n, const Produce& produce) {
    // On the stack: GCC recomputed a thread_local block's address (a
    // __tls_get_addr call) at every vector store of the loop.
    alignas(64) T block[kBlockElems];
    for (size_t done = 0; done < n; done += kBlockElems) {
      size_t k = std::min(kBlockElems, n - done);
      produce(done, block, k);
      memcpy(slot + done, block, k * sizeof(T));
    }
  }

  // LocalFirst: op(local, received) (kStepLocalFirst); float16 sum and
  // product commute bit for bit (NaNs are made canonical), so the F16C loop
  // serves both orders.
  template <bool LocalFirst = false>
  void reduceInto(bool pre, bool post, const T* received, const T* local, T* dst, size_t n) const {
    if constexpr (std::is_same_v<T, Half>)
      if (!post && reduceHalfFast(op, pre, received, local, dst, n)) return;
    if (pre && post) reduceElements<T, Op, true, true, LocalFirst>(op, received, local, dst, nullptr, n);
    else if (pre) reduceElements<T, Op, true, false, LocalFirst>(op, received, local, dst, nullptr, n);
    else if (post) reduceElements<T, Op, false, true, LocalFirst>(op, received, local, dst, nullptr, n);
    else reduceElements<T, Op, false, false, LocalFirst>(op, received, local, dst, nullptr, n);
  }
};

}  // namespace gyre
