#include "src/host/half_simd.h"

#include <immintrin.h>

#include "src/kernels/primitives/reduce_copy.h"
#include "src/kernels/primitives/reduce_op.h"

namespace gyre {
namespace {

#define GYRE_F16C __attribute__((target("avx,f16c")))

// float -> float16, nearest-even; any NaN becomes 0x7fff (Half::fromFloat).
GYRE_F16C inline __m128i roundToHalf(__m256 v) {
  __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
  __m128i nan = _mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7c00));
  return _mm_blendv_epi8(h, _mm_set1_epi16(0x7fff), nan);
}

GYRE_F16C inline __m256 load(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

GYRE_F16C void reduceF16C(HalfSimdOp op, const Half* received, const Half* local, Half* dst0, Half* dst1,
                          size_t n, const Half* scale) {
  const __m256 s = _mm256_set1_ps(scale ? scale->toFloat() : 1.0f);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r = load(received + i);
    __m256 l = load(local + i);
    if (scale) l = _mm256_cvtph_ps(roundToHalf(_mm256_mul_ps(l, s)));  // pre() rounds to float16
    __m128i h = roundToHalf(op == HalfSimdOp::Sum ? _mm256_add_ps(r, l) : _mm256_mul_ps(r, l));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst0 + i), h);
    if (dst1) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst1 + i), h);
  }
  // The last few elements through the portable loop: the same arithmetic.
  if (i == n) return;
  Half* d1 = dst1 ? dst1 + i : nullptr;
  if (scale)
    reduceElements<Half, OpPreMulSum<Half>, true, false>(OpPreMulSum<Half>{*scale}, received + i, local + i,
                                                         dst0 + i, d1, n - i);
  else if (op == HalfSimdOp::Sum)
    reduceElements<Half, OpSum<Half>, false, false>(OpSum<Half>{}, received + i, local + i, dst0 + i, d1, n - i);
  else
    reduceElements<Half, OpProd<Half>, false, false>(OpProd<Half>{}, received + i, local + i, dst0 + i, d1, n - i);
}

GYRE_F16C void scaleF16C(const Half* src, Half* dst0, Half* dst1, size_t n, Half scale) {
  const __m256 s = _mm256_set1_ps(scale.toFloat());
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = roundToHalf(_mm256_mul_ps(load(src + i), s));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst0 + i), h);
    if (dst1) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst1 + i), h);
  }
  if (i < n)
    copyElements<Half, OpPreMulSum<Half>, true, false>(OpPreMulSum<Half>{scale}, src + i, dst0 + i,
                                                       dst1 ? dst1 + i : nullptr, n - i);
}

bool cpuHasF16C() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

}  // namespace

bool halfReduceSimd(HalfSimdOp op, const Half* received, const Half* local, Half* dst0, Half* dst1, size_t n,
                    const Half* scale) {
  if (!cpuHasF16C()) return false;
  reduceF16C(op, received, local, dst0, dst1, n, scale);
  return true;
}

bool halfScaleSimd(const Half* src, Half* dst0, Half* dst1, size_t n, Half scale) {
  if (!cpuHasF16C()) return false;
  scaleF16C(src, dst0, dst1, n, scale);
  return true;
}

}  // namespace gyre
