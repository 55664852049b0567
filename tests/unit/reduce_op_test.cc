#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <vector>

#include "src/kernels/primitives/reduce_copy.h"
#include "src/kernels/primitives/reduce_op.h"

using namespace gyre;

TEST_CASE("integer sums and products wrap modulo 2^bits without undefined behaviour") {
  OpSum<int32_t> sum;
  CHECK(sum.apply(std::numeric_limits<int32_t>::max(), 1) == std::numeric_limits<int32_t>::min());
  OpSum<int8_t> sum8;
  CHECK(sum8.apply(int8_t{127}, int8_t{1}) == int8_t{-128});
  OpProd<uint8_t> prod8;
  CHECK(prod8.apply(uint8_t{16}, uint8_t{17}) == uint8_t{(16 * 17) & 0xff});
  OpProd<int64_t> prod64;
  CHECK(prod64.apply(int64_t{1} << 62, 4) == 0);
}

TEST_CASE("max and min pick the extreme of two values") {
  CHECK(OpMax<float>{}.apply(-1.5f, 2.0f) == 2.0f);
  CHECK(OpMin<double>{}.apply(-1.5, 2.0) == -1.5);
  CHECK(OpMax<uint64_t>{}.apply(~0ull, 1) == ~0ull);
  CHECK(OpMin<int8_t>{}.apply(int8_t{-128}, int8_t{127}) == int8_t{-128});
}

TEST_CASE("floating average premultiplies, integer average divides once at the end") {
  OpPreMulSum<double> favg{0.25};
  CHECK(favg.pre(8.0) == 2.0);
  CHECK(favg.post(3.0) == 3.0);
  OpSumPostDiv<int32_t> iavg{4};
  CHECK(iavg.pre(7) == 7);
  CHECK(iavg.post(-10) == -2);  // truncation toward zero
}

TEST_CASE("reduceElements writes both outputs and honours pre and post") {
  std::vector<int32_t> recv = {1, 2, 3, 4, 5}, local = {10, 20, 30, 40, 50}, a(5), b(5);
  OpSumPostDiv<int32_t> op{2};
  reduceElements<int32_t, OpSumPostDiv<int32_t>, false, true>(op, recv.data(), local.data(), a.data(), b.data(), 5);
  for (int i = 0; i < 5; ++i) {
    CHECK(a[i] == (recv[i] + local[i]) / 2);
    CHECK(b[i] == a[i]);
  }
}

TEST_CASE("reduceElements works in place (local and output alias)") {
  std::vector<float> recv(1001), buf(1001);
  for (int i = 0; i < 1001; ++i) {
    recv[i] = static_cast<float>(i);
    buf[i] = 0.5f * static_cast<float>(i);
  }
  reduceElements<float, OpSum<float>, false, false>(OpSum<float>{}, recv.data(), buf.data(), buf.data(), nullptr,
                                                     1001);
  for (int i = 0; i < 1001; ++i) CHECK(buf[i] == 1.5f * static_cast<float>(i));
}
