// Reduction operators, written once for the host executor and the CUDA kernels.
//
// An operator has three parts, as NCCL's ops do:
//   pre(x)     applied to each rank's own input as it enters the reduction
//              (the 1/n of a floating-point average, a PreMulSum scalar);
//   apply(a,b) the pairwise reduction, applied in the schedule's fixed order so
//              every rank gets the same bits;
//   post(x)    applied once to the fully reduced value (integer average's /n).
// Operators with trivial pre/post say so (kHasPre/kHasPost) so copy loops stay
// plain and vectorize.
#pragma once

#include <type_traits>

#include "src/kernels/primitives/float_types.h"  // +, * and < of the 16- and 8-bit float types
#include "src/kernels/primitives/host_device.h"

namespace gyre {

// Integer sums and products wrap modulo 2^bits, as in NCCL; doing them in the
// unsigned type keeps signed overflow defined.
template <typename T>
GYRE_HOST_DEVICE T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
GYRE_HOST_DEVICE T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <typename T>
struct OpSum {
  using Elem = T;
  static constexpr bool kHasPre = false, kHasPost = false;
  GYRE_HOST_DEVICE T pre(T x) const { return x; }
  GYRE_HOST_DEVICE T apply(T a, T b) const { return wrapAdd(a, b); }
  GYRE_HOST_DEVICE T post(T x) const { return x; }
};

template <typename T>
struct OpProd {
  using Elem = T;
  static constexpr bool kHasPre = false, kHasPost = false;
  GYRE_HOST_DEVICE T pre(T x) const { return x; }
  GYRE_HOST_DEVICE T apply(T a, T b) const { return wrapMul(a, b); }
  GYRE_HOST_DEVICE T post(T x) const { return x; }
};

// Max and min return one operand unchanged. With exactly one NaN operand they
// return the other (IEEE maxNum/minNum, as fmaxf and NCCL's __hmax do), so a
// NaN on one rank does not hide every other rank's value.
template <typename T>
GYRE_HOST_DEVICE bool isNan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else if constexpr (kIsNarrowFloat<T>) {
    float f = x.toFloat();
    return f != f;
  } else {
    return false;
  }
}

template <typename T>
struct OpMax {
  using Elem = T;
  static constexpr bool kHasPre = false, kHasPost = false;
  GYRE_HOST_DEVICE T pre(T x) const { return x; }
  GYRE_HOST_DEVICE T apply(T a, T b) const { return (a < b || isNan(a)) ? b : a; }
  GYRE_HOST_DEVICE T post(T x) const { return x; }
};

template <typename T>
struct OpMin {
  using Elem = T;
  static constexpr bool kHasPre = false, kHasPost = false;
  GYRE_HOST_DEVICE T pre(T x) const { return x; }
  GYRE_HOST_DEVICE T apply(T a, T b) const { return (b < a || isNan(a)) ? b : a; }
  GYRE_HOST_DEVICE T post(T x) const { return x; }
};

// Sum with every input first multiplied by a scalar: floating-point average
// (scalar = 1/nranks) and ncclRedOpCreatePreMulSum.
template <typename T>
struct OpPreMulSum {
  using Elem = T;
  static constexpr bool kHasPre = true, kHasPost = false;
  T scalar;
  GYRE_HOST_DEVICE T pre(T x) const { return wrapMul(x, scalar); }
  GYRE_HOST_DEVICE T apply(T a, T b) const { return wrapAdd(a, b); }
  GYRE_HOST_DEVICE T post(T x) const { return x; }
};

// Integer average: exact sum (wrapping like the sum op), then one division by
// nranks, truncating toward zero.
template <typename T>
struct OpSumPostDiv {
  using Elem = T;
  static constexpr bool kHasPre = false, kHasPost = true;
  int divisor;
  GYRE_HOST_DEVICE T pre(T x) const { return x; }
  GYRE_HOST_DEVICE T apply(T a, T b) const { return wrapAdd(a, b); }
  GYRE_HOST_DEVICE T post(T x) const { return static_cast<T>(x / static_cast<T>(divisor)); }
};

}  // namespace gyre
