#include "check.h"

#include <algorithm>
#include <cstring>

#include "datatypes.h"

namespace gyre_bench {
namespace {

// Largest binary exponent a float type can hold, for products of twos.
int maxExponent(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return 15;
    case ncclFloat64: return 1023;
    case ncclFloat8e4m3: return 8;   // largest finite value 448 = 1.75 * 2^8
    case ncclFloat8e5m2: return 15;
    default: return 127;  // float32, bfloat16
  }
}

}  // namespace

CheckPattern::CheckPattern(ncclDataType_t type, ncclRedOp_t op, int nranks)
    : type_(type), op_(op), nranks_(std::max(nranks, 1)), range_(100), scale_(1), offset_(0),
      tolerance_(0) {
  const int64_t n = nranks_;
  const int64_t limit = exactLimit(type);
  const bool isFloat = isFloatType(type);
  switch (op) {
    case ncclSum:
      // Integer sums may wrap (checked modulo 2^bits); float sums must not
      // leave the exactly representable integers.
      if (isFloat) range_ = std::min<int64_t>(100, limit / n + 1);
      break;
    case ncclProd:
      // Odd factors keep integer products non-zero modulo 2^bits; float
      // factors are 1 or 2 so every partial product is an exact power of two.
      offset_ = 1;
      range_ = isFloat ? (n <= maxExponent(type) ? 2 : 1) : 3;
      break;
    case ncclMax:
    case ncclMin:
      // [0, 100) fits every type down to int8; FP8 holds fewer integers.
      range_ = limit < 100 ? limit + 1 : 100;
      break;
    case ncclAvg:
      // Inputs k*nranks with sum nranks*sum(k) <= limit: the mean sum(k) is an
      // integer and no intermediate value wraps or rounds.
      scale_ = n;
      // (limit / n^2 first: with one rank and a 64-bit type, limit + 1 wraps.)
      range_ = limit / (n * n) >= 99 ? 100 : limit / (n * n) + 1;
      if (isFloat) tolerance_ = 4.0 * static_cast<double>(n) * typeEpsilon(type);
      break;
    default:
      break;
  }
  // input(r, i) depends on i only through i mod range_.
  reduced_.resize(static_cast<size_t>(range_));
  for (size_t i = 0; i < reduced_.size(); ++i) reduced_[i] = reduceAt(i);
}

int64_t CheckPattern::input(int rank, size_t index) const {
  // Multipliers are coprime to the ranges in use, so neighbouring elements and
  // neighbouring ranks get different values and a shifted or swapped block
  // shows up as wrong elements.
  uint64_t base = static_cast<uint64_t>(index) * 7 + static_cast<uint64_t>(rank) * 13 + 1;
  return static_cast<int64_t>(base % static_cast<uint64_t>(range_)) * scale_ + offset_;
}

int64_t CheckPattern::reduceAt(size_t index) const {
  // Unsigned arithmetic wraps modulo 2^64; storing the low bits of that is the
  // same as wrapping modulo 2^bits at every step, whatever order the library
  // combines ranks in.
  uint64_t acc = static_cast<uint64_t>(input(0, index));
  for (int r = 1; r < nranks_; ++r) {
    int64_t v = input(r, index);
    switch (op_) {
      case ncclSum:
      case ncclAvg: acc += static_cast<uint64_t>(v); break;
      case ncclProd: acc *= static_cast<uint64_t>(v); break;
      case ncclMax: acc = std::max<uint64_t>(acc, static_cast<uint64_t>(v)); break;
      case ncclMin: acc = std::min<uint64_t>(acc, static_cast<uint64_t>(v)); break;
      default: break;
    }
  }
  if (op_ == ncclAvg) acc /= static_cast<uint64_t>(nranks_);
  return static_cast<int64_t>(acc);
}

void fillInput(void* buf, size_t count, const CheckPattern& p, int rank, size_t firstIndex) {
  for (size_t i = 0; i < count; ++i) storeInteger(buf, i, p.type(), p.input(rank, firstIndex + i));
}

void poison(void* buf, size_t bytes) {
  // 0xff.. is NaN in every float type and -1 / max in integer types, which
  // the patterns above only produce through wraparound.
  std::memset(buf, 0xff, bytes);
}

}  // namespace gyre_bench
