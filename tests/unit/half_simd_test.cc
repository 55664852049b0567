// The F16C float16 loops (src/host/half_simd.h) against the portable loops
// they replace (src/kernels/primitives/reduce_copy.h): every float16 bit pattern
// as the received operand, paired with patterns that stress rounding,
// subnormals, overflow, infinities and NaNs, for sum, product and PreMulSum,
// with one and two outputs, lengths that leave a tail, and in place.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "src/kernels/primitives/reduce_copy.h"
#include "src/kernels/primitives/reduce_op.h"
#include "src/host/half_simd.h"

using namespace gyre;

namespace {

std::vector<Half> allPatterns() {
  std::vector<Half> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i].bits = static_cast<uint16_t>(i);
  return v;
}

// Local operands: random bits, plus values near ties, the largest finite
// values, subnormals, infinities and NaNs, cycling against every pattern.
std::vector<Half> localPatterns(size_t n) {
  const uint16_t special[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x3c01,
                              0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x3555, 0x1400};
  std::mt19937 rng(12345);
  std::vector<Half> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i].bits = i % 3 == 0 ? special[(i / 3) % (sizeof(special) / 2)] : static_cast<uint16_t>(rng());
  return v;
}

bool sameBits(const std::vector<Half>& a, const std::vector<Half>& b, size_t* where) {
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].bits != b[i].bits) {
      *where = i;
      return false;
    }
  return true;
}

template <typename Op, bool Pre>
void compareReduce(HalfSimdOp simdOp, const Op& op, const Half* scale, size_t n) {
  std::vector<Half> received = allPatterns(), local = localPatterns(received.size());
  received.resize(n);
  local.resize(n);
  std::vector<Half> want0(n), want1(n), got0(n), got1(n);
  reduceElements<Half, Op, Pre, false>(op, received.data(), local.data(), want0.data(), want1.data(), n);
  REQUIRE(halfReduceSimd(simdOp, received.data(), local.data(), got0.data(), got1.data(), n, scale));
  auto check = [&](const std::vector<Half>& want, const std::vector<Half>& got, const char* what) {
    size_t at = 0;
    const bool same = sameBits(want, got, &at);
    INFO(what << ": element " << at << ", received bits " << received[at].bits << ", local bits " << local[at].bits
              << ": want " << want[at].bits << ", got " << got[at].bits);
    CHECK(same);
  };
  check(want0, got0, "first output");
  check(want1, got1, "second output");
  // In place: the local operand is the output.
  std::vector<Half> inPlace = local;
  REQUIRE(halfReduceSimd(simdOp, received.data(), inPlace.data(), inPlace.data(), nullptr, n, scale));
  check(want0, inPlace, "in place");
}

}  // namespace

TEST_CASE("F16C float16 sum, product and PreMulSum give the portable loop's bits") {
  if (!__builtin_cpu_supports("f16c") || !__builtin_cpu_supports("avx")) {
    WARN("this CPU has no F16C/AVX: the portable loop runs and there is nothing to compare (not a pass)");
    CHECK(!halfReduceSimd(HalfSimdOp::Sum, nullptr, nullptr, nullptr, nullptr, 0, nullptr));
    return;
  }
  for (size_t n : {size_t(65536), size_t(65531), size_t(7), size_t(1)}) {
    INFO(n << " elements");
    compareReduce<OpSum<Half>, false>(HalfSimdOp::Sum, OpSum<Half>{}, nullptr, n);
    compareReduce<OpProd<Half>, false>(HalfSimdOp::Prod, OpProd<Half>{}, nullptr, n);
    for (uint16_t s : {uint16_t(0x3555), uint16_t(0x0001), uint16_t(0x7bff), uint16_t(0xb800)}) {
      Half scale{s};
      INFO("scale bits " << s);
      compareReduce<OpPreMulSum<Half>, true>(HalfSimdOp::Sum, OpPreMulSum<Half>{scale}, &scale, n);
    }
  }
}

TEST_CASE("F16C float16 scaling (an average's first copy) gives the portable loop's bits") {
  if (!__builtin_cpu_supports("f16c") || !__builtin_cpu_supports("avx")) {
    WARN("this CPU has no F16C/AVX: nothing to compare (not a pass)");
    return;
  }
  std::vector<Half> src = allPatterns();
  for (uint16_t s : {uint16_t(0x3555), uint16_t(0x3800), uint16_t(0x0001), uint16_t(0x7bff)}) {
    Half scale{s};
    std::vector<Half> want(src.size() - 3), got(src.size() - 3), got1(src.size() - 3);
    copyElements<Half, OpPreMulSum<Half>, true, false>(OpPreMulSum<Half>{scale}, src.data(), want.data(), nullptr,
                                                       want.size());
    REQUIRE(halfScaleSimd(src.data(), got.data(), got1.data(), got.size(), scale));
    size_t at = 0, at1 = 0;
    const bool same = sameBits(want, got, &at), same1 = sameBits(want, got1, &at1);
    INFO("scale bits " << s << ": first difference at " << at << " / " << at1);
    CHECK(same);
    CHECK(same1);
  }
}
