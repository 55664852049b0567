// The 16- and 8-bit floating-point element types: float16 (IEEE binary16),
// bfloat16, and the OCP 8-bit formats e4m3 (the "FN" variant: no infinities,
// largest finite 448, NaN = S.1111.111) and e5m2 (IEEE-like, with infinities).
// Each is a plain struct holding the bits, with conversions to and from float
// and the three operators the reduction ops of reduce_op.h use (+, *, <), so
// OpSum<Half> is the same template as OpSum<float>.
//
// On the device the conversions are the CUDA intrinsics; on the host they are
// portable C++ (bit manipulation, and a float addition to round subnormals)
// giving the same bits as those intrinsics for every non-NaN input, so the
// host build needs no CUDA headers. A NaN becomes the canonical NaN, positive
// with all-ones exponent and significand (0x7fff, 0x7f), which is what CUDA's
// host code returns.
//
// What precision each type reduces in
// ------------------------------------
// Each pairwise step — sum, prod, and avg's premultiply — converts both
// operands to float, does one float operation and rounds the result once to
// the type, to nearest with ties to even. Float carries at least 2p+2 bits for
// every p-bit significand here, so that double rounding is innocuous: each
// step is the correctly rounded operation of the type itself, bit for bit what
// NCCL's device code gives. Partial results are stored in the type between
// steps (an n-rank sum rounds n-1 times), as in NCCL; there is no wider
// accumulator.
//   float16    every step correctly rounded to binary16 (NCCL: __hadd/__hmul on
//              sm_53+, or float and __float2half); overflow gives ±Inf.
//   bfloat16   every step correctly rounded to bfloat16 (NCCL: __hadd/__hmul on
//              sm_80+, or float and __float2bfloat16); overflow gives ±Inf.
//   fp8 e4m3,  every step correctly rounded to the fp8 format, saturating: a
//   fp8 e5m2   result beyond the largest finite value (±448, ±57344) becomes that
//              value, and so does an e5m2 ±Inf operand; NaN stays NaN. NCCL
//              reduces fp8 only on sm_90+, computing in half (__hadd, __hmul)
//              and converting back with __NV_SATFINITE — the same bits.
//   max, min   exact: the result is one of the operands, unchanged, compared
//              as float; with a NaN operand or ±0 they pick the operand that
//              gyre's float max/min picks. (NCCL's __hmax/__hmin, like its
//              fmaxf/fminf for float, return the non-NaN operand, and on fp8
//              its result passes through __NV_SATFINITE, so an e5m2 ±Inf
//              becomes ±57344 there while gyre returns the Inf.)
//   avg        as NCCL's hostToDevRedOp: PreMulSum whose scalar is 1/n rounded
//              to float and then to the type (fp8 with __NV_SATFINITE); each
//              input is multiplied by it, rounded to the type, then summed. The
//              scalar is inexact unless n is a power of two (e4m3: 1/3 becomes
//              0.34375), and e4m3's 1/n is 0 from n = 1024 ranks (e5m2: 131072).
// bfloat16 subnormals are float subnormals: a flush-to-zero mode (nvcc
// --use_fast_math, or -ffast-math's startup code on the host) would flush them.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/kernels/primitives/host_device.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace gyre {

namespace float_bits {

GYRE_HOST_DEVICE uint32_t fromFloat(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

GYRE_HOST_DEVICE float toFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// What a conversion does with a value beyond the largest finite one (after
// rounding) and with an infinite input.
enum class Overflow { kInfinity, kSaturate, kNaN };

// A binary floating-point format of at most 16 bits. kIeeeSpecials: the
// all-ones exponent holds Inf and NaN; otherwise (e4m3 FN) only the all-ones
// pattern is NaN and the rest of that binade are ordinary numbers.
template <int kExpBits, int kManBits, bool kIeeeSpecials>
struct Format {
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr int kEmin = 1 - kBias;  // exponent of the smallest normal
  static constexpr uint32_t kSign = 1u << (kExpBits + kManBits);
  static constexpr uint32_t kExpMask = ((1u << kExpBits) - 1) << kManBits;
  static constexpr uint32_t kManMask = (1u << kManBits) - 1;
  static constexpr uint32_t kNaN = kExpMask | kManMask;
  static constexpr uint32_t kMaxFinite = kIeeeSpecials ? kExpMask - 1 : kNaN - 1;

  GYRE_HOST_DEVICE static uint32_t overflowed(uint32_t sign, Overflow mode) {
    return sign | (mode == Overflow::kInfinity ? kExpMask : mode == Overflow::kSaturate ? kMaxFinite : kNaN);
  }

  // Rounds to nearest, ties to even, without branches (a reduction loop
  // converts every element). From T's smallest normal up, adding just under
  // half of the dropped bits' unit plus the kept part's lowest bit rounds,
  // and a carry out of the significand reaches the exponent (up to overflow)
  // as it should. Below it, adding a float whose last place is T's subnormal
  // unit makes the float adder round to that unit (nearest even, the default
  // mode, which the float arithmetic of this file relies on anyway); the sum's
  // low bits are then T's encoding, the smallest normal included.
  GYRE_HOST_DEVICE static uint32_t encode(float f, Overflow mode) {
    constexpr int kDrop = 23 - kManBits;  // float significand bits T lacks
    constexpr uint32_t kRebias = static_cast<uint32_t>(127 - kBias) << 23;
    constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 + kEmin) << 23;
    constexpr uint32_t kSubnormalMagic = static_cast<uint32_t>(127 + kEmin - kManBits + 23) << 23;
    static_assert(kEmin - kManBits - 1 > -126, "half T's smallest subnormal must be a normal float");
    const uint32_t x = fromFloat(f);
    const uint32_t sign = (x >> 31) * kSign;
    const uint32_t mag = x & 0x7fffffffu;
    const uint32_t rebiased = mag - kRebias;  // used only when mag >= kMinNormal
    const uint32_t normal = (rebiased + ((1u << (kDrop - 1)) - 1) + ((rebiased >> kDrop) & 1)) >> kDrop;
    const uint32_t subnormal = fromFloat(toFloat(mag) + toFloat(kSubnormalMagic)) - kSubnormalMagic;
    const uint32_t bits = mag < kMinNormal ? subnormal : normal;
    const uint32_t result = bits > kMaxFinite || mag == 0x7f800000u ? overflowed(sign, mode) : sign | bits;
    return mag > 0x7f800000u ? kNaN : result;
  }

  // Exact for every pattern, also without branches: a subnormal's value,
  // man units of 2^(kEmin - kManBits), is a normal float, computed exactly.
  GYRE_HOST_DEVICE static float decode(uint32_t bits) {
    constexpr uint32_t kSubnormalUnit = static_cast<uint32_t>(127 + kEmin - kManBits) << 23;
    const uint32_t sign = (bits & kSign) << (31 - kExpBits - kManBits);
    const uint32_t exp = (bits & kExpMask) >> kManBits, man = bits & kManMask;
    const uint32_t normal = ((exp + 127 - kBias) << 23) | (man << (23 - kManBits));
    const uint32_t subnormal = fromFloat(static_cast<float>(man) * toFloat(kSubnormalUnit));
    const uint32_t special = kIeeeSpecials ? 0x7f800000u | (man ? 0x400000u | (man << (23 - kManBits)) : 0)
                                           : 0x7fc00000u | (man << (23 - kManBits));
    const bool isSpecial = kIeeeSpecials ? exp == (kExpMask >> kManBits) : (bits & ~kSign) == kNaN;
    return toFloat(sign | (isSpecial ? special : exp == 0 ? subnormal : normal));
  }
};

using HalfFormat = Format<5, 10, true>;
using E4M3Format = Format<4, 3, false>;
using E5M2Format = Format<5, 2, true>;

}  // namespace float_bits

// IEEE binary16. Overflow rounds to ±Inf, as __float2half_rn.
struct Half {
  uint16_t bits;

  GYRE_HOST_DEVICE static Half fromFloat(float f) {
#if defined(__CUDA_ARCH__)
    return Half{__half_as_ushort(__float2half_rn(f))};
#else
    return Half{static_cast<uint16_t>(float_bits::HalfFormat::encode(f, float_bits::Overflow::kInfinity))};
#endif
  }
  GYRE_HOST_DEVICE float toFloat() const {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(bits));
#else
    return float_bits::HalfFormat::decode(bits);
#endif
  }
};

// bfloat16: the top 16 bits of a float. Overflow rounds to ±Inf, as
// __float2bfloat16_rn.
struct Bfloat16 {
  uint16_t bits;

  GYRE_HOST_DEVICE static Bfloat16 fromFloat(float f) {
#if defined(__CUDA_ARCH__)
    return Bfloat16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
#else
    const uint32_t x = float_bits::fromFloat(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return Bfloat16{0x7fff};
    // Adding just under half of the dropped part's unit, plus the kept part's
    // lowest bit, rounds to nearest with ties to even; a carry may reach the
    // exponent, up to Inf, which is right.
    return Bfloat16{static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16)};
#endif
  }
  GYRE_HOST_DEVICE float toFloat() const {
#if defined(__CUDA_ARCH__)
    return __bfloat162float(__ushort_as_bfloat16(bits));
#else
    return float_bits::toFloat(static_cast<uint32_t>(bits) << 16);
#endif
  }
};

// How a float becomes fp8 when it is beyond the largest finite value (after
// rounding) or infinite. kSatFinite is __NV_SATFINITE, which NCCL's device
// code uses for every fp8 value it writes (the __nv_fp8_* constructors) and so
// gyre's arithmetic does: ±max finite. kNoSat is __NV_NOSAT: e5m2 gives ±Inf,
// e4m3 (which has no Inf) NaN, keeping the sign as CUDA does.
enum class Fp8Saturation { kSatFinite, kNoSat };

// OCP fp8 e4m3 "FN": bias 7, no infinities, largest finite 448.
struct Fp8E4M3 {
  uint8_t bits;

  GYRE_HOST_DEVICE static Fp8E4M3 fromFloat(float f, Fp8Saturation sat = Fp8Saturation::kSatFinite) {
#if defined(__CUDA_ARCH__)
    return Fp8E4M3{static_cast<uint8_t>(
        __nv_cvt_float_to_fp8(f, sat == Fp8Saturation::kSatFinite ? __NV_SATFINITE : __NV_NOSAT, __NV_E4M3))};
#else
    const auto mode = sat == Fp8Saturation::kSatFinite ? float_bits::Overflow::kSaturate : float_bits::Overflow::kNaN;
    return Fp8E4M3{static_cast<uint8_t>(float_bits::E4M3Format::encode(f, mode))};
#endif
  }
  GYRE_HOST_DEVICE float toFloat() const {
#if defined(__CUDA_ARCH__)
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, __NV_E4M3)));
#else
    return float_bits::E4M3Format::decode(bits);
#endif
  }
};

// OCP fp8 e5m2: bias 15, IEEE-like with ±Inf, largest finite 57344.
struct Fp8E5M2 {
  uint8_t bits;

  GYRE_HOST_DEVICE static Fp8E5M2 fromFloat(float f, Fp8Saturation sat = Fp8Saturation::kSatFinite) {
#if defined(__CUDA_ARCH__)
    return Fp8E5M2{static_cast<uint8_t>(
        __nv_cvt_float_to_fp8(f, sat == Fp8Saturation::kSatFinite ? __NV_SATFINITE : __NV_NOSAT, __NV_E5M2))};
#else
    const auto mode =
        sat == Fp8Saturation::kSatFinite ? float_bits::Overflow::kSaturate : float_bits::Overflow::kInfinity;
    return Fp8E5M2{static_cast<uint8_t>(float_bits::E5M2Format::encode(f, mode))};
#endif
  }
  GYRE_HOST_DEVICE float toFloat() const {
#if defined(__CUDA_ARCH__)
    return __half2float(__half(__nv_cvt_fp8_to_halfraw(bits, __NV_E5M2)));
#else
    return float_bits::E5M2Format::decode(bits);
#endif
  }
};

static_assert(sizeof(Half) == 2 && sizeof(Bfloat16) == 2 && sizeof(Fp8E4M3) == 1 && sizeof(Fp8E5M2) == 1,
              "element types are their storage, nothing more");
static_assert(std::is_trivially_copyable_v<Half> && std::is_trivially_copyable_v<Fp8E4M3>);

// True for the types of this file, which reduce through float.
template <typename T>
inline constexpr bool kIsNarrowFloat = false;
template <>
inline constexpr bool kIsNarrowFloat<Half> = true;
template <>
inline constexpr bool kIsNarrowFloat<Bfloat16> = true;
template <>
inline constexpr bool kIsNarrowFloat<Fp8E4M3> = true;
template <>
inline constexpr bool kIsNarrowFloat<Fp8E5M2> = true;

// One float operation, one rounding back to T (see the top of this file).
template <typename T, std::enable_if_t<kIsNarrowFloat<T>, int> = 0>
GYRE_HOST_DEVICE T operator+(T a, T b) {
  return T::fromFloat(a.toFloat() + b.toFloat());
}

template <typename T, std::enable_if_t<kIsNarrowFloat<T>, int> = 0>
GYRE_HOST_DEVICE T operator*(T a, T b) {
  return T::fromFloat(a.toFloat() * b.toFloat());
}

// Compares values as float does: false whenever either is NaN, -0 == +0.
template <typename T, std::enable_if_t<kIsNarrowFloat<T>, int> = 0>
GYRE_HOST_DEVICE bool operator<(T a, T b) {
  return a.toFloat() < b.toFloat();
}

}  // namespace gyre
