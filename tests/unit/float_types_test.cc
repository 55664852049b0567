// The 16- and 8-bit float types against an independent reference: values are
// decoded from their fields with ldexp, and rounding is done in long double
// from frexp, in the terms of IEEE 754 and the OCP 8-bit float spec — none of
// it shares code with src/kernels/primitives/float_types.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/kernels/primitives/float_types.h"
#include "src/kernels/primitives/reduce_op.h"
#include "nccl.h"

using namespace gyre;

namespace {

// ---- The reference ---------------------------------------------------------------

struct Spec {
  int expBits, manBits;
  bool hasInf;  // IEEE top binade (Inf, NaN); false: e4m3 FN, only S.1111.111 is NaN
};

enum class OnOverflow { kInf, kMaxFinite, kNaN };

int biasOf(const Spec& s) { return (1 << (s.expBits - 1)) - 1; }

long double maxFinite(const Spec& s) {
  if (s.hasInf) return std::ldexp(2.0L - std::ldexp(1.0L, -s.manBits), biasOf(s));
  return std::ldexp(2.0L - std::ldexp(1.0L, 1 - s.manBits), biasOf(s) + 1);  // 1.110 at the top exponent
}

// (-1)^sign * 2^(exp - bias) * 1.man, or 2^(1 - bias) * 0.man when exp is 0.
long double refDecode(const Spec& s, uint32_t bits) {
  const uint32_t manMask = (1u << s.manBits) - 1, expMax = (1u << s.expBits) - 1;
  const uint32_t man = bits & manMask, exp = (bits >> s.manBits) & expMax;
  const bool negative = (bits >> (s.expBits + s.manBits)) & 1;
  long double v;
  if (s.hasInf && exp == expMax) v = man ? NAN : INFINITY;
  else if (!s.hasInf && exp == expMax && man == manMask) v = NAN;
  else if (exp == 0) v = std::ldexp(static_cast<long double>(man), 1 - biasOf(s) - s.manBits);
  else v = std::ldexp(static_cast<long double>(man | (manMask + 1)), static_cast<int>(exp) - biasOf(s) - s.manBits);
  return negative ? -v : v;
}

// The format's value nearest to x, ties to the even significand.
long double refRound(const Spec& s, long double x, OnOverflow overflow) {
  if (std::isnan(x)) return NAN;
  const long double a = std::fabs(x);
  long double r = INFINITY;
  if (!std::isinf(a)) {
    int e;
    std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    const int binade = std::max(e - 1, 1 - biasOf(s));
    const long double ulp = std::ldexp(1.0L, binade - s.manBits);
    long double units = std::floor(a / ulp);
    const long double frac = a / ulp - units;
    if (frac > 0.5L || (frac == 0.5L && std::fmod(units, 2.0L) == 1.0L)) units += 1;
    r = units * ulp;
  }
  if (r > maxFinite(s)) {
    if (overflow == OnOverflow::kNaN) return NAN;
    r = overflow == OnOverflow::kInf ? INFINITY : maxFinite(s);
  }
  return std::signbit(x) ? -r : r;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool sameValue(long double want, long double got) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  return want == got && std::signbit(want) == std::signbit(got);
}

// ---- The types under test ------------------------------------------------------------

template <typename T>
struct Fmt;
template <>
struct Fmt<Half> {
  static constexpr Spec kSpec{5, 10, true};
  static constexpr OnOverflow kArithmetic = OnOverflow::kInf, kNoSat = OnOverflow::kInf;
  static constexpr uint32_t kCanonicalNaN = 0x7fff;
};
template <>
struct Fmt<Bfloat16> {
  static constexpr Spec kSpec{8, 7, true};
  static constexpr OnOverflow kArithmetic = OnOverflow::kInf, kNoSat = OnOverflow::kInf;
  static constexpr uint32_t kCanonicalNaN = 0x7fff;
};
template <>
struct Fmt<Fp8E4M3> {
  static constexpr Spec kSpec{4, 3, false};
  static constexpr OnOverflow kArithmetic = OnOverflow::kMaxFinite, kNoSat = OnOverflow::kNaN;
  static constexpr uint32_t kCanonicalNaN = 0x7f;
};
template <>
struct Fmt<Fp8E5M2> {
  static constexpr Spec kSpec{5, 2, true};
  static constexpr OnOverflow kArithmetic = OnOverflow::kMaxFinite, kNoSat = OnOverflow::kInf;
  static constexpr uint32_t kCanonicalNaN = 0x7f;
};

template <typename T>
constexpr uint32_t kPatterns = 1u << (8 * sizeof(T));

template <typename T>
T fromBits(uint32_t bits) {
  return T{static_cast<decltype(T::bits)>(bits)};
}

template <typename T>
long double valueOf(T x) {
  return refDecode(Fmt<T>::kSpec, x.bits);
}

// The conversion gyre's arithmetic uses (saturating for fp8), or __NV_NOSAT's.
template <typename T>
T convert(float f, bool saturating) {
  if constexpr (sizeof(T) == 1)
    return T::fromFloat(f, saturating ? Fp8Saturation::kSatFinite : Fp8Saturation::kNoSat);
  else
    return T::fromFloat(f);
}

// Collects mismatches so a sweep of 65536 cases makes one assertion, with examples.
struct Mismatches {
  size_t count = 0;
  std::string examples;
  void add(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (count++ >= 6) return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    examples.append(buf).append("\n");
  }
};

#define CHECK_NONE(m)      \
  do {                     \
    INFO((m).examples);    \
    CHECK((m).count == 0); \
  } while (0)

// Floats where rounding decides: every finite value of T, each midpoint between
// neighbours (the ties, including the one between the largest finite value and
// the overflow), the floats either side of each midpoint, a stride through all
// 2^32 float patterns, and random floats over T's exponent range.
template <typename T>
std::vector<float> roundingProbes() {
  const Spec& s = Fmt<T>::kSpec;
  std::vector<float> probes;
  const uint32_t positive = kPatterns<T> / 2;
  for (uint32_t b = 0; b < positive; ++b) {
    const long double v = refDecode(s, b);
    if (!std::isfinite(v)) continue;
    long double next = refDecode(s, b + 1);
    if (b + 1 == positive || !std::isfinite(next)) next = 2 * v - refDecode(s, b - 1);  // one ulp past the max
    const float mid = static_cast<float>((v + next) / 2);  // exact: one more bit than T
    for (float p : {static_cast<float>(v), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(p);
      probes.push_back(-p);
    }
  }
  for (uint64_t u = 0; u < (1ull << 32); u += 4099) {
    const uint32_t x = static_cast<uint32_t>(u);
    float f;
    std::memcpy(&f, &x, 4);
    probes.push_back(f);
  }
  std::mt19937 rng(12345);
  const int lo = std::max(1, 127 + (1 - biasOf(s)) - s.manBits - 3), hi = std::min(254, 127 + biasOf(s) + 2);
  for (int i = 0; i < (1 << 18); ++i) {
    const uint32_t exp = static_cast<uint32_t>(lo + static_cast<int>(rng() % static_cast<uint32_t>(hi - lo + 1)));
    const uint32_t x = (rng() & 0x807fffffu) | (exp << 23);
    float f;
    std::memcpy(&f, &x, 4);
    probes.push_back(f);
  }
  for (float f : {0.0f, FLT_MIN, FLT_MAX, FLT_TRUE_MIN, 0x1.fffffcp-127f, INFINITY, NAN}) {
    probes.push_back(f);
    probes.push_back(-f);
  }
  return probes;
}

}  // namespace

#define NARROW_FLOATS Half, Bfloat16, Fp8E4M3, Fp8E5M2

TEMPLATE_TEST_CASE("every bit pattern decodes to the value its sign, exponent and significand denote", "",
                   NARROW_FLOATS) {
  Mismatches m;
  for (uint32_t b = 0; b < kPatterns<TestType>; ++b) {
    const long double want = refDecode(Fmt<TestType>::kSpec, b);
    const float got = fromBits<TestType>(b).toFloat();
    if (!sameValue(want, got)) m.add("0x%x decodes to %a, expected %La", b, got, want);
  }
  CHECK_NONE(m);
}

TEMPLATE_TEST_CASE("every bit pattern survives a round trip through float, NaN staying NaN", "", NARROW_FLOATS) {
  Mismatches m;
  for (uint32_t b = 0; b < kPatterns<TestType>; ++b) {
    const float f = fromBits<TestType>(b).toFloat();
    const bool nan = std::isnan(refDecode(Fmt<TestType>::kSpec, b));
    for (bool saturating : {true, false}) {
      const uint32_t back = convert<TestType>(f, saturating).bits;
      uint32_t want = b;
      // Saturation (NCCL's __NV_SATFINITE) turns e5m2's ±Inf into ±57344.
      if (std::is_same_v<TestType, Fp8E5M2> && saturating && (b & 0x7f) == 0x7c) want = (b & 0x80) | 0x7b;
      if (nan ? !std::isnan(refDecode(Fmt<TestType>::kSpec, back)) : back != want)
        m.add("0x%x -> %a -> 0x%x (%s)", b, f, back, saturating ? "saturating" : "no saturation");
    }
  }
  CHECK_NONE(m);
}

TEMPLATE_TEST_CASE("float converts to the nearest value, ties to even, as a frexp reference rounds", "",
                   NARROW_FLOATS) {
  const Spec& s = Fmt<TestType>::kSpec;
  Mismatches m;
  const std::vector<float> probes = roundingProbes<TestType>();
  for (float f : probes) {
    for (bool saturating : {true, false}) {
      const OnOverflow overflow = saturating ? Fmt<TestType>::kArithmetic : Fmt<TestType>::kNoSat;
      const long double want = refRound(s, f, overflow);
      const TestType got = convert<TestType>(f, saturating);
      if (!sameValue(want, valueOf(got)))
        m.add("%a -> 0x%x = %La, expected %La (%s)", f, got.bits, valueOf(got), want,
              saturating ? "saturating" : "no saturation");
    }
  }
  INFO(probes.size() << " floats probed");
  CHECK_NONE(m);
}

TEMPLATE_TEST_CASE("a NaN converts to the canonical positive NaN, as CUDA's conversions give", "", NARROW_FLOATS) {
  CHECK(convert<TestType>(NAN, true).bits == Fmt<TestType>::kCanonicalNaN);
  CHECK(convert<TestType>(-NAN, true).bits == Fmt<TestType>::kCanonicalNaN);
  CHECK(convert<TestType>(-NAN, false).bits == Fmt<TestType>::kCanonicalNaN);
}

TEST_CASE("float16 boundaries: largest finite, overflow, smallest subnormal, ties to even") {
  CHECK(Half::fromFloat(65504.0f).bits == 0x7bff);
  CHECK(Half::fromFloat(65519.996f).bits == 0x7bff);  // just below the tie with 65536
  CHECK(Half::fromFloat(65520.0f).bits == 0x7c00);    // the tie goes to the even "65536": Inf
  CHECK(Half::fromFloat(-1e10f).bits == 0xfc00);
  CHECK(Half::fromFloat(INFINITY).bits == 0x7c00);
  CHECK(Half::fromFloat(0x1p-24f).bits == 0x0001);
  CHECK(Half::fromFloat(0x1p-25f).bits == 0x0000);  // half the smallest subnormal: tie to even 0
  CHECK(Half::fromFloat(0x1.000002p-25f).bits == 0x0001);
  CHECK(Half::fromFloat(0x3p-25f).bits == 0x0002);  // 1.5 units: tie to even 2
  CHECK(Half::fromFloat(0x1p-14f).bits == 0x0400);  // smallest normal
  CHECK(Half::fromFloat(1.0f + 0x1p-11f).bits == 0x3c00);
  CHECK(Half::fromFloat(1.0f + 0x3p-11f).bits == 0x3c02);
  CHECK(Half::fromFloat(-0.0f).bits == 0x8000);
  CHECK(Half{0x7bff}.toFloat() == 65504.0f);
  CHECK(Half{0x0001}.toFloat() == 0x1p-24f);
  CHECK(std::isinf(Half{0xfc00}.toFloat()));
  CHECK(std::isnan(Half{0x7c01}.toFloat()));
}

TEST_CASE("bfloat16 boundaries: largest finite, overflow, smallest subnormal, ties to even") {
  CHECK(Bfloat16::fromFloat(0x1.fep127f).bits == 0x7f7f);
  CHECK(Bfloat16::fromFloat(0x1.fefffep127f).bits == 0x7f7f);
  CHECK(Bfloat16::fromFloat(0x1.ffp127f).bits == 0x7f80);  // the tie with 2^128 overflows
  CHECK(Bfloat16::fromFloat(-FLT_MAX).bits == 0xff80);
  CHECK(Bfloat16::fromFloat(0x1p-133f).bits == 0x0001);
  CHECK(Bfloat16::fromFloat(0x1p-134f).bits == 0x0000);
  CHECK(Bfloat16::fromFloat(0x3p-134f).bits == 0x0002);
  CHECK(Bfloat16::fromFloat(1.0f + 0x1p-8f).bits == 0x3f80);
  CHECK(Bfloat16::fromFloat(1.0f + 0x3p-8f).bits == 0x3f82);
  CHECK(Bfloat16{0x0001}.toFloat() == 0x1p-133f);
  CHECK(std::isnan(Bfloat16{0xffc1}.toFloat()));
}

TEST_CASE("fp8 e4m3 boundaries: 448 is the largest, overflow saturates (or is NaN without saturation)") {
  CHECK(Fp8E4M3::fromFloat(448.0f).bits == 0x7e);
  CHECK(Fp8E4M3::fromFloat(464.0f).bits == 0x7e);  // the tie with 480 goes to even 448
  CHECK(Fp8E4M3::fromFloat(464.5f).bits == 0x7e);  // saturated
  CHECK(Fp8E4M3::fromFloat(464.5f, Fp8Saturation::kNoSat).bits == 0x7f);
  CHECK(Fp8E4M3::fromFloat(-1e6f).bits == 0xfe);
  CHECK(Fp8E4M3::fromFloat(-1e6f, Fp8Saturation::kNoSat).bits == 0xff);
  CHECK(Fp8E4M3::fromFloat(INFINITY).bits == 0x7e);
  CHECK(Fp8E4M3::fromFloat(-INFINITY).bits == 0xfe);
  CHECK(Fp8E4M3::fromFloat(0x1p-9f).bits == 0x01);
  CHECK(Fp8E4M3::fromFloat(0x1p-10f).bits == 0x00);
  CHECK(Fp8E4M3::fromFloat(0x3p-10f).bits == 0x02);
  CHECK(Fp8E4M3::fromFloat(0x1p-6f).bits == 0x08);  // smallest normal
  CHECK(Fp8E4M3{0x7e}.toFloat() == 448.0f);
  CHECK(Fp8E4M3{0x78}.toFloat() == 256.0f);  // the top binade holds numbers, not Inf
  CHECK(std::isnan(Fp8E4M3{0x7f}.toFloat()));
  CHECK(std::isnan(Fp8E4M3{0xff}.toFloat()));
}

TEST_CASE("fp8 e5m2 boundaries: 57344 is the largest, overflow and Inf saturate (or are Inf without saturation)") {
  CHECK(Fp8E5M2::fromFloat(57344.0f).bits == 0x7b);
  CHECK(Fp8E5M2::fromFloat(61439.996f).bits == 0x7b);
  CHECK(Fp8E5M2::fromFloat(61440.0f).bits == 0x7b);  // the tie with 65536 overflows; saturated
  CHECK(Fp8E5M2::fromFloat(61440.0f, Fp8Saturation::kNoSat).bits == 0x7c);
  CHECK(Fp8E5M2::fromFloat(INFINITY).bits == 0x7b);
  CHECK(Fp8E5M2::fromFloat(-INFINITY).bits == 0xfb);
  CHECK(Fp8E5M2::fromFloat(-INFINITY, Fp8Saturation::kNoSat).bits == 0xfc);
  CHECK(Fp8E5M2::fromFloat(0x1p-16f).bits == 0x01);
  CHECK(Fp8E5M2::fromFloat(0x1p-17f).bits == 0x00);
  CHECK(Fp8E5M2::fromFloat(0x3p-17f).bits == 0x02);
  CHECK(Fp8E5M2{0x7b}.toFloat() == 57344.0f);
  CHECK(std::isinf(Fp8E5M2{0xfc}.toFloat()));
  CHECK(std::isnan(Fp8E5M2{0x7d}.toFloat()));
}

namespace {

// Checks sum and prod against the correctly rounded result, and max and min
// against the larger and smaller value, picking the same operand as gyre's
// float max and min (which decides NaN and ±0).
template <typename T>
void checkApply(T a, T b, Mismatches& m) {
  const Spec& s = Fmt<T>::kSpec;
  const long double x = valueOf(a), y = valueOf(b);
  const OnOverflow overflow = Fmt<T>::kArithmetic;
  const T sum = OpSum<T>{}.apply(a, b), prod = OpProd<T>{}.apply(a, b);
  if (!sameValue(refRound(s, x + y, overflow), valueOf(sum)))
    m.add("0x%x + 0x%x = 0x%x, expected %La", a.bits, b.bits, sum.bits, refRound(s, x + y, overflow));
  if (!sameValue(refRound(s, x * y, overflow), valueOf(prod)))
    m.add("0x%x * 0x%x = 0x%x, expected %La", a.bits, b.bits, prod.bits, refRound(s, x * y, overflow));
  const T max = OpMax<T>{}.apply(a, b), min = OpMin<T>{}.apply(a, b);
  // The operand gyre's float max and min pick (this decides NaN and ±0) ...
  const float fa = a.toFloat(), fb = b.toFloat();
  const T floatMax = sameBits(OpMax<float>{}.apply(fa, fb), fa) ? a : b;
  const T floatMin = sameBits(OpMin<float>{}.apply(fa, fb), fa) ? a : b;
  bool ok = max.bits == floatMax.bits && min.bits == floatMin.bits;
  // Two NaN operands: either one is a correct answer (float conversion may
  // map both to the same NaN bits, so "which operand" is not observable).
  if (std::isnan(fa) && std::isnan(fb)) ok = std::isnan(max.toFloat()) && std::isnan(min.toFloat());
  // ... and, without NaN, the larger and smaller value.
  if (!std::isnan(x) && !std::isnan(y)) ok = ok && valueOf(max) == std::max(x, y) && valueOf(min) == std::min(x, y);
  if (!ok) m.add("max/min of 0x%x, 0x%x gave 0x%x/0x%x", a.bits, b.bits, max.bits, min.bits);
}

}  // namespace

TEMPLATE_TEST_CASE("sum, prod, max and min of every pair of fp8 values equal the correctly rounded result", "",
                   Fp8E4M3, Fp8E5M2) {
  Mismatches m;
  for (uint32_t a = 0; a < 256; ++a)
    for (uint32_t b = 0; b < 256; ++b) checkApply(fromBits<TestType>(a), fromBits<TestType>(b), m);
  CHECK_NONE(m);
}

TEMPLATE_TEST_CASE("sum, prod, max and min of 16-bit float pairs equal the correctly rounded result", "", Half,
                   Bfloat16) {
  // All pairs of the values where arithmetic turns (zeros, subnormals, the normal
  // boundary, one and its neighbours, the largest finite, Inf, NaN), then random pairs.
  const Spec& s = Fmt<TestType>::kSpec;
  const uint32_t sign = 0x8000, inf = ((1u << s.expBits) - 1) << s.manBits;
  const uint32_t one = static_cast<uint32_t>(biasOf(s)) << s.manBits, minNormal = 1u << s.manBits;
  std::vector<uint32_t> special = {0, 1, 2, 3, inf - 2, inf - 1, inf, inf + 1, Fmt<TestType>::kCanonicalNaN};
  for (uint32_t b : {one - 1, one, one + 1, minNormal - 1, minNormal, minNormal + 1})
    special.push_back(b);
  for (size_t i = 0, n = special.size(); i < n; ++i) special.push_back(special[i] | sign);
  Mismatches m;
  for (uint32_t a : special)
    for (uint32_t b : special) checkApply(fromBits<TestType>(a), fromBits<TestType>(b), m);
  std::mt19937 rng(777);
  for (int i = 0; i < (1 << 19); ++i) {
    const uint32_t a = rng() & 0xffff;
    // Half the time b is near a in magnitude so sums cancel and carry.
    const uint32_t b = (i & 1) ? rng() & 0xffff : (a ^ (rng() & 0x803f));
    checkApply(fromBits<TestType>(a), fromBits<TestType>(b), m);
  }
  CHECK_NONE(m);
}

TEMPLATE_TEST_CASE("avg premultiplies by 1/n rounded to the type, as NCCL does, rounding each product once", "",
                   NARROW_FLOATS) {
  const Spec& s = Fmt<TestType>::kSpec;
  for (int n : {1, 2, 3, 5, 7, 8, 100, 1000, 1024, 4096}) {
    INFO("nranks " << n);
    const float inverse = static_cast<float>(1.0 / n);
    const TestType scalar = convert<TestType>(inverse, true);
    CHECK(sameValue(refRound(s, inverse, Fmt<TestType>::kArithmetic), valueOf(scalar)));
    const OpPreMulSum<TestType> avg{scalar};
    Mismatches m;
    std::mt19937 rng(n);
    for (uint32_t i = 0; i < std::min<uint32_t>(kPatterns<TestType>, 1u << 16); ++i) {
      const TestType x = fromBits<TestType>(sizeof(TestType) == 1 ? i : rng() & 0xffff);
      const long double want = refRound(s, valueOf(x) * valueOf(scalar), Fmt<TestType>::kArithmetic);
      const TestType got = avg.pre(x);
      if (!sameValue(want, valueOf(got))) m.add("0x%x * 1/%d -> 0x%x, expected %La", x.bits, n, got.bits, want);
    }
    CHECK_NONE(m);
  }
  // The documented cost of following NCCL: e4m3 cannot hold 1/3 (0.34375), and 1/n vanishes from 1024 ranks.
  if constexpr (std::is_same_v<TestType, Fp8E4M3>) {
    CHECK(Fp8E4M3::fromFloat(static_cast<float>(1.0 / 3)).toFloat() == 0.34375f);
    CHECK(Fp8E4M3::fromFloat(static_cast<float>(1.0 / 1023)).toFloat() == 0x1p-9f);
    CHECK(Fp8E4M3::fromFloat(static_cast<float>(1.0 / 1024)).toFloat() == 0.0f);
  }
}

TEST_CASE("a single-rank host communicator reduces every 16- and 8-bit type with every op") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  REQUIRE(gyreCommInitRankHost(&comm, 1, id, 0, nullptr) == ncclSuccess);
  const float values[] = {1.5f, -2.0f, 0.25f, 0.0f, -0.0f, 3.0f, 0.125f};
  auto run = [&](auto zero, ncclDataType_t type) {
    using T = decltype(zero);
    constexpr size_t n = sizeof values / sizeof values[0];
    T in[n], out[n];
    for (size_t i = 0; i < n; ++i) in[i] = T::fromFloat(values[i]);
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg}) {
      INFO("datatype " << type << " op " << op);
      std::memset(out, 0xee, sizeof out);
      REQUIRE(ncclAllReduce(in, out, n, type, op, comm, nullptr) == ncclSuccess);
      for (size_t i = 0; i < n; ++i) CHECK(out[i].bits == in[i].bits);  // one rank: the input, even for avg
    }
  };
  run(Half{}, ncclFloat16);
  run(Bfloat16{}, ncclBfloat16);
  run(Fp8E4M3{}, ncclFloat8e4m3);
  run(Fp8E5M2{}, ncclFloat8e5m2);
  CHECK(ncclCommDestroy(comm) == ncclSuccess);
}
