// Data patterns whose reductions are known exactly, for -c 1.
//
// Every rank fills its input with small non-negative integers that depend on
// the rank and the element index. The ranges are chosen per type and op so
// that the reduced value is exact in the type: float sums stay below 2^mantissa,
// products of floats are powers of two, integer sums and products may wrap and
// are then computed with the same modulo-2^bits arithmetic, and averages use
// inputs that are multiples of nranks so the mean is an integer. A wrong
// element therefore means a wrong result, never a rounding difference (except
// float averages, which NCCL may compute by premultiplying with 1/nranks, and
// get a few-ulp tolerance).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gyre.h"

namespace gyre_bench {

class CheckPattern {
 public:
  CheckPattern(ncclDataType_t type, ncclRedOp_t op, int nranks);

  // Value that `rank` places at element `index` of its input.
  int64_t input(int rank, size_t index) const;
  // `op` applied over input(r, index) for every rank r, as the library must
  // return it (integer types: low bits of the wrapped result).
  int64_t reduced(size_t index) const { return reduced_[index % reduced_.size()]; }
  // Relative tolerance for comparisons (0 = exact).
  double tolerance() const { return tolerance_; }
  ncclDataType_t type() const { return type_; }

 private:
  ncclDataType_t type_;
  ncclRedOp_t op_;
  int nranks_;
  int64_t range_;     // inputs are drawn from [0, range_) ...
  int64_t scale_;     // ... times scale_ (nranks for avg, else 1)
  int64_t offset_;    // ... plus offset_ (1 for prod, so no zeros)
  double tolerance_;
  // input() has period range_ in the index, so reduced() is a table of one
  // period: checking 256 MiB does not redo the reduction per element.
  std::vector<int64_t> reduced_;
  int64_t reduceAt(size_t index) const;
};

// Writes input(rank, firstIndex + i) for i in [0, count).
void fillInput(void* buf, size_t count, const CheckPattern& p, int rank, size_t firstIndex);

// Overwrites buf with bytes that no check value equals (NaN for floats), so a
// collective that writes nothing cannot pass on a previous run's result.
void poison(void* buf, size_t bytes);

// Number of elements i in [0, count) with buf[i] != expected(i).
template <typename Expected>
size_t countWrong(const void* buf, size_t count, const CheckPattern& p, Expected expected);

}  // namespace gyre_bench

#include "datatypes.h"

namespace gyre_bench {

template <typename Expected>
size_t countWrong(const void* buf, size_t count, const CheckPattern& p, Expected expected) {
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i)
    if (!elementEquals(buf, i, p.type(), expected(i), p.tolerance())) ++wrong;
  return wrong;
}

}  // namespace gyre_bench
