// float16 reductions on the host with F16C and AVX: 8 elements converted to
// float, combined and rounded back per instruction. GCC cannot vectorize the
// portable float16 conversions (branches per element), which made a float16
// AllReduce ~6x slower than float32 (scripts/check-vectorization). Results are
// bit for bit those of the portable loop (src/kernels/primitives/reduce_copy.h):
// the same float operation and round-to-nearest-even, subnormals kept, and a
// NaN result made the canonical NaN (0x7fff) as Half::fromFloat does.
// Chosen at run time, so the library still runs on CPUs without F16C.
#pragma once

#include <cstddef>

#include "src/kernels/primitives/float_types.h"

namespace gyre {

enum class HalfSimdOp { Sum, Prod };

// dst0[i] (and dst1[i] if non-null) = received[i] op pre(local[i]), where pre
// multiplies by *scale (rounded to float16, as PreMulSum's pre) when scale is
// non-null. False, writing nothing, when this CPU lacks F16C or AVX.
bool halfReduceSimd(HalfSimdOp op, const Half* received, const Half* local, Half* dst0, Half* dst1, size_t n,
                    const Half* scale);
// dst0[i] (and dst1[i]) = src[i] * scale rounded to float16 (PreMulSum's pre
// on a copy: an average's first step). False as above.
bool halfScaleSimd(const Half* src, Half* dst0, Half* dst1, size_t n, Half scale);

}  // namespace gyre
