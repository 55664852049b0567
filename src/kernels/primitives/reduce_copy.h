// The element loops every schedule step ends in: copy a chunk (applying the
// op's pre/post where the step says so) or reduce a received chunk with a
// local one, writing one or two outputs. Shared by the host executor and the
// CUDA kernels (a kernel hands each thread its own sub-range). No __restrict__: in-place calls alias local and
// dst0 element for element, and GCC vectorizes behind a runtime overlap check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/kernels/primitives/host_device.h"

namespace gyre {

// One quiet NaN for float and double results (other types pass through; the
// narrow floats already round every NaN to one pattern). Where every rank
// computes the same reduction itself (recursive doubling) the compiler may
// commute an addition, and which operand's NaN payload survives depends on
// the order (x86 keeps the first), so two ranks could hold different NaN
// bits. Every reduction does it, so every algorithm gives the same NaN.
template <typename T>
GYRE_HOST_DEVICE T canonicalNan(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (v == v) return v;
    using Bits = std::conditional_t<std::is_same_v<T, float>, uint32_t, uint64_t>;
    const Bits quiet = std::is_same_v<T, float> ? Bits(0x7fc00000u) : Bits(0x7ff8000000000000ull);
    T nan;
    memcpy(&nan, &quiet, sizeof nan);
    return nan;
  } else {
    return v;
  }
}

// One element of a copy: post?(pre?(v)).
template <typename T, typename Op, bool Pre, bool Post>
GYRE_HOST_DEVICE T copyOne(const Op& op, T v) {
  if constexpr (Pre) v = op.pre(v);
  if constexpr (Post) v = op.post(v);
  return v;
}

// One element of a reduction: post?(apply(received, pre?(local))), operands
// swapped for LocalFirst.
template <typename T, typename Op, bool Pre, bool Post, bool LocalFirst>
GYRE_HOST_DEVICE T reduceOne(const Op& op, T received, T local) {
  if constexpr (Pre) local = op.pre(local);
  T v = LocalFirst ? op.apply(local, received) : op.apply(received, local);
  if constexpr (Post) v = op.post(v);
  return canonicalNan(v);
}

// dst0[i] (and dst1[i] if non-null) = post?(pre?(src[i]))
template <typename T, typename Op, bool Pre, bool Post>
GYRE_HOST_DEVICE void copyElements(const Op& op, const T* src, T* dst0,
                                   T* dst1, size_t n) {
  if (dst1) {
    for (size_t i = 0; i < n; ++i) {
      T v = copyOne<T, Op, Pre, Post>(op, src[i]);
      dst0[i] = v;
      dst1[i] = v;
    }
  } else {
    for (size_t i = 0; i < n; ++i) dst0[i] = copyOne<T, Op, Pre, Post>(op, src[i]);
  }
}

// dst0[i] (and dst1[i]) = post?(apply(received[i], pre?(local[i])))
template <typename T, typename Op, bool Pre, bool Post, bool LocalFirst = false>
GYRE_HOST_DEVICE void reduceElements(const Op& op, const T* received, const T* local,
                                     T* dst0, T* dst1, size_t n) {
  if (dst1) {
    for (size_t i = 0; i < n; ++i) {
      T v = reduceOne<T, Op, Pre, Post, LocalFirst>(op, received[i], local[i]);
      dst0[i] = v;
      dst1[i] = v;
    }
  } else {
    for (size_t i = 0; i < n; ++i) dst0[i] = reduceOne<T, Op, Pre, Post, LocalFirst>(op, received[i], local[i]);
  }
}

}  // namespace gyre
