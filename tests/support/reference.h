// reference.h — independent reference reductions for the multi-process tests.
//
// The reference never uses gyre's arithmetic: integer results are computed exactly
// modulo 2^bits in 64-bit unsigned arithmetic (which wraps, unlike signed), float
// results in long double. A float result is accepted when it is within a bound that
// holds for any summation order (the ring and the tree reduce in different orders):
// first-order rounding error of n-1 additions, (n-1)·u·Σ|x| with u = eps/2; the
// tolerance is 2·(n+1)·eps·Σ|x| (relative for prod), several times that bound, yet far
// below the size of any lost or doubled contribution. Max and min must be exact.
//
// Each type is one row of kTypeTable with its storage codec, so a new datatype is
// one row here and one entry in a test's list of types.
#ifndef GYRE_TESTS_SUPPORT_REFERENCE_H_
#define GYRE_TESTS_SUPPORT_REFERENCE_H_

#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmath>
#include <string>
#include <vector>

#include "gyre.h"

namespace gyre::test {

enum class Kind { kSigned, kUnsigned, kFloat };

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  Kind kind;
  long double epsilon;     // floats: spacing of the format just above 1.0
  long double tiny;        // floats: smallest positive subnormal, an absolute floor
  long double (*load)(const void*);        // floats: stored value, exactly
  void (*store)(long double, void*);       // floats: nearest representable value
};

// ---- Storage codecs ------------------------------------------------------------------

namespace ref_detail {

inline long double loadF32(const void* p) { float v; memcpy(&v, p, 4); return v; }
inline void storeF32(long double v, void* p) { float f = float(v); memcpy(p, &f, 4); }
inline long double loadF64(const void* p) { double v; memcpy(&v, p, 8); return v; }
inline void storeF64(long double v, void* p) { double d = double(v); memcpy(p, &d, 8); }

// IEEE binary16, round to nearest even.
inline long double loadF16(const void* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  long double v;
  if (exp == 0) v = std::ldexp((long double)mant, -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp((long double)(mant | 0x400), exp - 25);
  return sign ? -v : v;
}
inline void storeF16(long double v, void* p) {
  float f = float(v);
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, mant = x & 0x7fffff;
  int exp = int((x >> 23) & 0xff);
  uint16_t h;
  if (exp == 0xff) {
    h = uint16_t(sign | 0x7c00 | (mant ? 0x200 : 0));
  } else if (exp - 112 >= 31) {
    h = uint16_t(sign | 0x7c00);
  } else if (exp - 112 <= 0) {
    int shift = 14 - (exp - 112);
    if (shift > 24) {
      h = uint16_t(sign);
    } else {
      mant |= 0x800000;
      uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
      if (rem > half || (rem == half && (q & 1))) ++q;
      h = uint16_t(sign | q);
    }
  } else {
    uint32_t q = (uint32_t(exp - 112) << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) ++q;  // a carry into the exponent is right
    h = uint16_t(sign | q);
  }
  memcpy(p, &h, 2);
}

// bfloat16: the top half of a binary32, round to nearest even.
inline long double loadBf16(const void* p) {
  uint16_t b;
  memcpy(&b, p, 2);
  uint32_t x = uint32_t(b) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
inline void storeBf16(long double v, void* p) {
  float f = float(v);
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t b = uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
  memcpy(p, &b, 2);
}

// OCP fp8: e4m3 (bias 7, no infinities, 0x7f/0xff are NaN) and e5m2 (bias 15, IEEE-like).
inline long double decodeE4m3(uint8_t b) {
  int sign = b >> 7, exp = (b >> 3) & 0xf, mant = b & 7;
  long double v;
  if (exp == 15 && mant == 7) v = NAN;
  else if (exp == 0) v = std::ldexp((long double)mant, -9);
  else v = std::ldexp((long double)(mant | 8), exp - 10);
  return sign ? -v : v;
}
inline long double decodeE5m2(uint8_t b) {
  int sign = b >> 7, exp = (b >> 2) & 0x1f, mant = b & 3;
  long double v;
  if (exp == 31) v = mant ? NAN : INFINITY;
  else if (exp == 0) v = std::ldexp((long double)mant, -16);
  else v = std::ldexp((long double)(mant | 4), exp - 17);
  return sign ? -v : v;
}
// Nearest finite code; only used to make inputs, so ties may go either way.
template <long double (*Decode)(uint8_t)>
inline uint8_t encodeFp8(long double v) {
  static const std::vector<long double> values = [] {
    std::vector<long double> all(256);
    for (int c = 0; c < 256; ++c) all[c] = Decode(uint8_t(c));
    return all;
  }();
  uint8_t best = 0;
  long double bestErr = INFINITY;
  for (int c = 0; c < 256; ++c) {
    if (!std::isfinite(values[c])) continue;
    long double err = std::fabs(values[c] - v);
    if (err < bestErr) bestErr = err, best = uint8_t(c);
  }
  return best;
}
inline long double loadE4m3(const void* p) { return decodeE4m3(*static_cast<const uint8_t*>(p)); }
inline void storeE4m3(long double v, void* p) { *static_cast<uint8_t*>(p) = encodeFp8<decodeE4m3>(v); }
inline long double loadE5m2(const void* p) { return decodeE5m2(*static_cast<const uint8_t*>(p)); }
inline void storeE5m2(long double v, void* p) { *static_cast<uint8_t*>(p) = encodeFp8<decodeE5m2>(v); }

}  // namespace ref_detail

inline const std::vector<TypeInfo>& typeTable() {
  using namespace ref_detail;
  static const std::vector<TypeInfo> table = {
      {ncclInt8, "int8", 1, Kind::kSigned, 0, 0, nullptr, nullptr},
      {ncclUint8, "uint8", 1, Kind::kUnsigned, 0, 0, nullptr, nullptr},
      {ncclInt32, "int32", 4, Kind::kSigned, 0, 0, nullptr, nullptr},
      {ncclUint32, "uint32", 4, Kind::kUnsigned, 0, 0, nullptr, nullptr},
      {ncclInt64, "int64", 8, Kind::kSigned, 0, 0, nullptr, nullptr},
      {ncclUint64, "uint64", 8, Kind::kUnsigned, 0, 0, nullptr, nullptr},
      {ncclFloat16, "float16", 2, Kind::kFloat, 0x1p-10L, 0x1p-24L, loadF16, storeF16},
      {ncclFloat32, "float32", 4, Kind::kFloat, FLT_EPSILON, 0x1p-149L, loadF32, storeF32},
      {ncclFloat64, "float64", 8, Kind::kFloat, DBL_EPSILON, 0x1p-1074L, loadF64, storeF64},
      {ncclBfloat16, "bfloat16", 2, Kind::kFloat, 0x1p-7L, 0x1p-133L, loadBf16, storeBf16},
      {ncclFloat8e4m3, "float8e4m3", 1, Kind::kFloat, 0x1p-3L, 0x1p-9L, loadE4m3, storeE4m3},
      {ncclFloat8e5m2, "float8e5m2", 1, Kind::kFloat, 0x1p-2L, 0x1p-16L, loadE5m2, storeE5m2},
  };
  return table;
}

inline const TypeInfo& typeInfo(ncclDataType_t t) {
  for (const TypeInfo& info : typeTable())
    if (info.type == t) return info;
  return typeTable().front();  // unreachable for valid types
}

inline const char* opName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "op?";
  }
}

// ---- Inputs --------------------------------------------------------------------------

inline uint64_t splitmix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The seed of one rank's input in one case; every rank can regenerate every input.
inline uint64_t inputSeed(uint64_t caseId, int rank) {
  uint64_t s = caseId * 0x100000001b3ull + uint64_t(rank) * 0x9e3779b97f4a7c15ull + 12345;
  return splitmix64(&s);
}

inline uint64_t intMask(const TypeInfo& t) {
  return t.size == 8 ? ~0ull : (1ull << (8 * t.size)) - 1;
}

// Reads an integer element as its value: sign-extended for signed types.
inline int64_t loadSigned(const TypeInfo& t, const void* p) {
  switch (t.size) {
    case 1: { int8_t v; memcpy(&v, p, 1); return v; }
    case 2: { int16_t v; memcpy(&v, p, 2); return v; }
    case 4: { int32_t v; memcpy(&v, p, 4); return v; }
    default: { int64_t v; memcpy(&v, p, 8); return v; }
  }
}
inline uint64_t loadUnsigned(const TypeInfo& t, const void* p) {
  uint64_t v = 0;
  memcpy(&v, p, t.size);  // little-endian host
  return v;
}
inline void storeBits(const TypeInfo& t, uint64_t bits, void* p) { memcpy(p, &bits, t.size); }

// Fills `count` elements. Integers span the whole range (so sum and prod wrap), with
// a quarter of the elements small (zeros, ties, negatives). For ncclAvg on integers,
// values are small enough that the exact sum of `nranks` of them fits the type, so
// "sum, then divide toward zero" is unambiguous. Floats: [-1,1] for sum and avg,
// ±[0.5,2] for prod (no overflow), ±[0.5,100] for max and min.
inline void fillInput(const TypeInfo& t, ncclRedOp_t op, int nranks, uint64_t seed, void* buf,
                      size_t count) {
  uint64_t state = seed;
  char* out = static_cast<char*>(buf);
  for (size_t i = 0; i < count; ++i) {
    uint64_t r = splitmix64(&state);
    void* p = out + i * t.size;
    if (t.kind == Kind::kFloat) {
      long double u = (long double)(r >> 11) * 0x1p-53L;  // [0,1)
      long double sign = (r & 1) ? -1.0L : 1.0L;
      long double v;
      if (op == ncclProd) v = sign * std::pow(2.0L, 2 * u - 1);
      else if (op == ncclMax || op == ncclMin) v = sign * (0.5L + 99.5L * u);
      else v = 2 * u - 1;
      t.store(v, p);
      continue;
    }
    bool small = (r & 3) == 0;
    uint64_t bits = small ? uint64_t(int64_t((r >> 8) % 7) - 3) : splitmix64(&state);
    if (op == ncclAvg) {
      uint64_t n = uint64_t(nranks);
      if (t.kind == Kind::kSigned) {
        uint64_t limit = (intMask(t) >> 1) / n;  // |x| <= (2^(bits-1)-1)/n
        // In [-limit, limit], computed unsigned: with one rank the remainder can
        // exceed INT64_MAX, and the signed subtraction would overflow.
        bits = bits % (2 * limit + 1) - limit;
      } else {
        const uint64_t limit = intMask(t) / n;  // x <= (2^bits-1)/n
        if (limit != ~0ull) bits %= limit + 1;
      }
    }
    storeBits(t, bits & intMask(t), p);
  }
}

// ---- Reference and comparison ----------------------------------------------------------

inline std::string formatElement(const TypeInfo& t, const void* p) {
  char buf[64];
  if (t.kind == Kind::kFloat) snprintf(buf, sizeof buf, "%.21Lg", t.load(p));
  else if (t.kind == Kind::kSigned) snprintf(buf, sizeof buf, "%lld", (long long)loadSigned(t, p));
  else snprintf(buf, sizeof buf, "%llu", (unsigned long long)loadUnsigned(t, p));
  return buf;
}

// Checks one element of an allreduce result against the reduction of the inputs.
// Returns "" when it is right, else what was expected.
inline std::string checkElement(const TypeInfo& t, ncclRedOp_t op,
                                const std::vector<const void*>& inputs, size_t i,
                                const void* got) {
  const size_t n = inputs.size();
  auto in = [&](size_t r) { return static_cast<const char*>(inputs[r]) + i * t.size; };
  char buf[160];
  if (t.kind != Kind::kFloat) {
    const uint64_t mask = intMask(t);
    const bool isSigned = t.kind == Kind::kSigned;
    uint64_t want = 0;
    if (op == ncclSum || op == ncclProd) {
      want = op == ncclSum ? 0 : 1;  // mod 2^64 arithmetic, truncated: exact mod 2^bits
      for (size_t r = 0; r < n; ++r) {
        uint64_t v = loadUnsigned(t, in(r));
        want = op == ncclSum ? want + v : want * v;
      }
    } else if (op == ncclMax || op == ncclMin) {
      want = loadUnsigned(t, in(0));
      for (size_t r = 1; r < n; ++r) {
        uint64_t v = loadUnsigned(t, in(r));
        bool less = isSigned ? loadSigned(t, in(r)) < loadSigned(t, &want)
                             : v < want;
        if (op == ncclMax ? !less && v != want : less) want = v;
      }
    } else {  // ncclAvg: exact sum, then C division (toward zero) by n
      __int128 sum = 0;
      for (size_t r = 0; r < n; ++r)
        sum += isSigned ? __int128(loadSigned(t, in(r))) : __int128(loadUnsigned(t, in(r)));
      want = uint64_t(int64_t(sum / __int128(n)));
    }
    want &= mask;
    uint64_t have = loadUnsigned(t, got) & mask;
    if (have == want) return "";
    uint64_t wantStore = want;
    snprintf(buf, sizeof buf, "expected %s", formatElement(t, &wantStore).c_str());
    return buf;
  }

  long double acc = 0, absSum = 0;
  bool bad = false;
  long double want = 0, tol = 0;
  if (op == ncclMax || op == ncclMin) {
    want = t.load(in(0));
    for (size_t r = 1; r < n; ++r) {
      long double v = t.load(in(r));
      if (op == ncclMax ? v > want : v < want) want = v;
    }
  } else if (op == ncclProd) {
    acc = 1;
    for (size_t r = 0; r < n; ++r) acc *= t.load(in(r));
    want = acc;
    tol = 2 * (long double)(n + 1) * t.epsilon * std::fabs(want) + t.tiny;
  } else {
    for (size_t r = 0; r < n; ++r) {
      long double v = t.load(in(r));
      acc += v;
      absSum += std::fabs(v);
    }
    want = acc;
    tol = 2 * (long double)(n + 1) * t.epsilon * absSum + t.tiny;
    if (op == ncclAvg) {
      want /= (long double)n;
      tol /= (long double)n;
    }
  }
  long double have = t.load(got);
  bad = !std::isfinite(have) || std::fabs(have - want) > tol;
  if (!bad) return "";
  snprintf(buf, sizeof buf, "expected %.21Lg within %.3Lg (off by %.3Lg)", want, tol,
           std::fabs(have - want));
  return buf;
}

// Describes up to `maxReports` wrong elements of `got` (count elements), or "".
inline std::string compareToReference(const TypeInfo& t, ncclRedOp_t op,
                                      const std::vector<const void*>& inputs, const void* got,
                                      size_t count, int maxReports = 4) {
  std::string report;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const void* g = static_cast<const char*>(got) + i * t.size;
    std::string why = checkElement(t, op, inputs, i, g);
    if (why.empty()) continue;
    if (int(wrong++) < maxReports) {
      report.append("[").append(std::to_string(i)).append("] got ").append(formatElement(t, g));
      report.append(", ").append(why).append(" (inputs");
      for (const void* in : inputs)
        report.append(" ").append(formatElement(t, static_cast<const char*>(in) + i * t.size));
      report.append("); ");
    }
  }
  if (wrong > 0)
    report.append(std::to_string(wrong)).append(" of ").append(std::to_string(count)).append(" elements wrong");
  return report;
}

// Checks one element of a PreMulSum result, Σ_r scalars[r]·inputs[r][i], where each
// rank's scalar is one element of the type (as ncclRedOpCreatePreMulSum takes it).
// Integers: exact modulo 2^bits (products and sum wrap). Floats: each of the n products
// and n-1 sums rounds once, at most (2n-1)·u·Σ|s·x| with u = eps/2; the tolerance is
// 2·(n+1)·eps·Σ|s·x| as for sum, plus n subnormal units for products that underflow.
inline std::string checkPreMulSumElement(const TypeInfo& t, const std::vector<const void*>& scalars,
                                         const std::vector<const void*>& inputs, size_t i, const void* got) {
  const size_t n = inputs.size();
  auto in = [&](size_t r) { return static_cast<const char*>(inputs[r]) + i * t.size; };
  char buf[160];
  if (t.kind != Kind::kFloat) {
    uint64_t want = 0;
    for (size_t r = 0; r < n; ++r) want += loadUnsigned(t, scalars[r]) * loadUnsigned(t, in(r));
    want &= intMask(t);
    if ((loadUnsigned(t, got) & intMask(t)) == want) return "";
    snprintf(buf, sizeof buf, "expected %s", formatElement(t, &want).c_str());
    return buf;
  }
  long double want = 0, absSum = 0;
  for (size_t r = 0; r < n; ++r) {
    long double p = t.load(scalars[r]) * t.load(in(r));
    want += p;
    absSum += std::fabs(p);
  }
  const long double tol = 2 * (long double)(n + 1) * t.epsilon * absSum + (long double)n * t.tiny;
  const long double have = t.load(got);
  if (std::isfinite(have) && std::fabs(have - want) <= tol) return "";
  snprintf(buf, sizeof buf, "expected %.21Lg within %.3Lg (off by %.3Lg)", want, tol, std::fabs(have - want));
  return buf;
}

// Describes up to `maxReports` wrong elements of a PreMulSum result, or "".
inline std::string compareToPreMulSumReference(const TypeInfo& t, const std::vector<const void*>& scalars,
                                               const std::vector<const void*>& inputs, const void* got,
                                               size_t count, int maxReports = 4) {
  std::string report;
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const void* g = static_cast<const char*>(got) + i * t.size;
    std::string why = checkPreMulSumElement(t, scalars, inputs, i, g);
    if (why.empty()) continue;
    if (int(wrong++) < maxReports) {
      report.append("[").append(std::to_string(i)).append("] got ").append(formatElement(t, g));
      report.append(", ").append(why).append(" (scalar·input");
      for (size_t r = 0; r < inputs.size(); ++r)
        report.append(" ")
            .append(formatElement(t, scalars[r]))
            .append("·")
            .append(formatElement(t, static_cast<const char*>(inputs[r]) + i * t.size));
      report.append("); ");
    }
  }
  if (wrong > 0)
    report.append(std::to_string(wrong)).append(" of ").append(std::to_string(count)).append(" elements wrong");
  return report;
}

// FNV-1a over bytes: a cheap fingerprint to compare results across ranks and calls.
inline uint64_t fnv1a(const void* data, size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace gyre::test

#endif  // GYRE_TESTS_SUPPORT_REFERENCE_H_
