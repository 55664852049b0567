// The device API's reduce/copy helpers (include/nccl_device/reduce_copy.h)
// compiled for the host, as the fake runs device code: every element type
// size the 16-byte packs take (1, 2, 4 and 8 bytes) and one they cannot
// (12), every operator, buffers at every offset from a 16-byte boundary
// (the same for all, so a head, packs and a tail; or different, so element
// by element), counts 0, 1 and primes, more sources than the call resolves
// up front, and groups of 1 and 3 threads. Each result equals a plain loop
// that combines each element's sources in order, and nothing outside the
// `count` elements is written.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "include/nccl_device.h"

namespace {

struct Group {
  int r, n;
  int thread_rank() const { return r; }
  int size() const { return n; }
  int num_threads() const { return n; }
  void sync() {}
};

struct Vec3 {  // 12 bytes: never packed
  float x, y, z;
  bool operator==(const Vec3& o) const { return x == o.x && y == o.y && z == o.z; }
};

template <typename T>
T valueAt(int source, size_t i) {
  // Small values whose products over 20 sources stay in range: -1, 1 or 2.
  const int v = int((i * 7 + size_t(source) * 3) % 3) - 1;
  return T(v == 0 ? 2 : v);
}
template <>
Vec3 valueAt<Vec3>(int source, size_t i) {
  return Vec3{float(source), float(i), float(source) * 0.5f + float(i % 5)};
}

template <typename T>
struct Sum {
  T operator()(T a, T b) const { return T(a + b); }
};
template <typename T>
struct Prod {
  T operator()(T a, T b) const { return T(a * b); }
};
template <typename T>
struct Min {
  T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct Max {
  T operator()(T a, T b) const { return a < b ? b : a; }
};
struct Vec3Sum {
  Vec3 operator()(Vec3 a, Vec3 b) const { return Vec3{a.x + b.x, a.y + b.y, a.z + b.z}; }
};

const size_t kCounts[] = {0, 1, 2, 3, 5, 7, 13, 31, 61, 127, 257};
constexpr size_t kGuard = 3;  // elements either side that must stay untouched

// A buffer whose element 0 lies `offset` elements past a 16-byte boundary,
// with kGuard elements before it and after `count`, all filled with `fill`.
template <typename T>
struct Placed {
  std::vector<unsigned char> bytes;
  T* at = nullptr;
  Placed(size_t offset, size_t count, T fill) : bytes((offset + count + 2 * kGuard + 2) * sizeof(T) + 32) {
    uintptr_t base = reinterpret_cast<uintptr_t>(bytes.data());
    base = (base + 15) / 16 * 16 + 16 * ((kGuard * sizeof(T) + 15) / 16);  // room for the front guard
    at = reinterpret_cast<T*>(base) + offset;
    for (size_t i = 0; i < count + 2 * kGuard; ++i) at[i - kGuard] = fill;
  }
};

// One case: nSrc sources and nDst destinations, buffer k starting at
// offsets[k % offsets.size()] elements past a 16-byte boundary; "" when
// every destination equals the reference and every guard its fill.
template <typename T, typename Op>
std::string runCase(const Op& op, int nSrc, int nDst, const std::vector<size_t>& offsets, size_t count,
                    int threads) {
  const T fill = valueAt<T>(99, 1);
  std::vector<Placed<T>> src, dst;
  for (int s = 0; s < nSrc; ++s) {
    src.emplace_back(offsets[size_t(s) % offsets.size()], count, fill);
    for (size_t i = 0; i < count; ++i) src.back().at[i] = valueAt<T>(s, i);
  }
  for (int d = 0; d < nDst; ++d) dst.emplace_back(offsets[size_t(nSrc + d) % offsets.size()], count, fill);
  for (int t = 0; t < threads; ++t)  // a group's threads in turn: the helpers do not sync the group
    ncclLsaReduceLsaCopy<T>(Group{t, threads}, [&](int s) { return src[size_t(s)].at; }, nSrc,
                            [&](int d) { return dst[size_t(d)].at; }, nDst, op, count);
  for (int d = 0; d < nDst; ++d) {
    const T* out = dst[size_t(d)].at;
    for (size_t i = 0; i < count; ++i) {
      T want = valueAt<T>(0, i);
      for (int s = 1; s < nSrc; ++s) want = op(want, valueAt<T>(s, i));
      if (!(out[i] == want))
        return "destination " + std::to_string(d) + " element " + std::to_string(i) + " differs";
    }
    for (size_t g = 1; g <= kGuard; ++g)
      if (!(out[-ptrdiff_t(g)] == fill) || !(out[count + g - 1] == fill))
        return "destination " + std::to_string(d) + " written outside its " + std::to_string(count) + " elements";
  }
  return "";
}

// Every shape of call for one type and operator.
template <typename T, typename Op>
void everyShape(const char* name, const Op& op) {
  const size_t phases = 16 % sizeof(T) == 0 ? 16 / sizeof(T) : 1;
  for (size_t phase = 0; phase < phases; ++phase) {
    const std::vector<std::vector<size_t>> layouts = {{phase}, {phase, (phase + 1) % phases}};
    for (const auto& layout : layouts)
      for (int nSrc : {1, 2, 3, 19})
        for (int nDst : {1, 2, 18})
          for (size_t count : kCounts)
            for (int threads : {1, 3}) {
              const std::string wrong = runCase<T>(op, nSrc, nDst, layout, count, threads);
              INFO(name << ": " << nSrc << " sources, " << nDst << " destinations, offsets " << layout[0] << "/"
                        << layout.back() << ", count " << count << ", " << threads << " threads: " << wrong);
              REQUIRE(wrong.empty());
            }
  }
}

template <typename T>
void everyOperator(const char* name) {
  everyShape<T>((std::string(name) + " sum").c_str(), Sum<T>());
  everyShape<T>((std::string(name) + " product").c_str(), Prod<T>());
  everyShape<T>((std::string(name) + " min").c_str(), Min<T>());
  everyShape<T>((std::string(name) + " max").c_str(), Max<T>());
}

}  // namespace

TEST_CASE("the reduce/copy helpers equal an element-by-element loop for every element size and operator, at "
          "every alignment, for counts 0, 1 and primes",
          "[device][device_api]") {
  everyOperator<int8_t>("int8");
  everyOperator<uint8_t>("uint8");
  everyOperator<uint16_t>("uint16");
  everyOperator<int32_t>("int32");
  everyOperator<uint32_t>("uint32");
  everyOperator<int64_t>("int64");
  everyOperator<uint64_t>("uint64");
  everyOperator<float>("float");
  everyOperator<double>("double");
  everyShape<Vec3>("12-byte elements sum", Vec3Sum());
}

TEST_CASE("the strided local helpers sum and copy at unaligned offsets", "[device][device_api]") {
  for (size_t count : kCounts)
    for (size_t offset : {size_t(0), size_t(1), size_t(3)}) {
      const int n = 3;
      std::vector<float> base(offset + size_t(n) * count + 1, -7.0f), out(offset + 2 * count + 1, -7.0f);
      for (int s = 0; s < n; ++s)
        for (size_t i = 0; i < count; ++i) base[offset + size_t(s) * count + i] = valueAt<float>(s, i);
      ncclLocalReduceSumCopy(Group{0, 1}, n, base.data() + offset, count, 2, out.data() + offset, count, count);
      for (size_t k = 0; k < 2 * count; ++k) {
        const size_t i = k % count;
        const float want = valueAt<float>(0, i) + valueAt<float>(1, i) + valueAt<float>(2, i);
        INFO("count " << count << ", offset " << offset << ", element " << k);
        REQUIRE(out[offset + k] == want);
      }
      REQUIRE(out[offset + 2 * count] == -7.0f);
    }
}
