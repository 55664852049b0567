// Instantiates the shared reduction primitives in device code, so every build
// with nvcc proves that the arithmetic the host executor runs (and the tests
// check) also compiles for the GPU. The CUDA executor of a later issue
// replaces this file's role.
#include <cstdint>

#include "kernels/primitives/reduce_copy.h"
#include "kernels/primitives/reduce_op.h"

namespace gyre {

template <typename T, typename Op>
__global__ void reduceChunkKernel(Op op, const T* received, const T* local, T* out, size_t n) {
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) reduceElements<T, Op, Op::kHasPre, Op::kHasPost>(op, received + i, local + i, out + i, nullptr, 1);
}

template __global__ void reduceChunkKernel<float, OpSum<float>>(OpSum<float>, const float*, const float*, float*,
                                                                 size_t);
template __global__ void reduceChunkKernel<double, OpPreMulSum<double>>(OpPreMulSum<double>, const double*,
                                                                         const double*, double*, size_t);
template __global__ void reduceChunkKernel<int64_t, OpSumPostDiv<int64_t>>(OpSumPostDiv<int64_t>, const int64_t*,
                                                                            const int64_t*, int64_t*, size_t);
template __global__ void reduceChunkKernel<int8_t, OpMax<int8_t>>(OpMax<int8_t>, const int8_t*, const int8_t*,
                                                                   int8_t*, size_t);
template __global__ void reduceChunkKernel<uint32_t, OpProd<uint32_t>>(OpProd<uint32_t>, const uint32_t*,
                                                                        const uint32_t*, uint32_t*, size_t);

// The 16- and 8-bit float types, every op the host executor instantiates for them.
#define GYRE_CHECK_NARROW_FLOAT(T)                                                                               \
  template __global__ void reduceChunkKernel<T, OpSum<T>>(OpSum<T>, const T*, const T*, T*, size_t);             \
  template __global__ void reduceChunkKernel<T, OpProd<T>>(OpProd<T>, const T*, const T*, T*, size_t);           \
  template __global__ void reduceChunkKernel<T, OpMax<T>>(OpMax<T>, const T*, const T*, T*, size_t);             \
  template __global__ void reduceChunkKernel<T, OpMin<T>>(OpMin<T>, const T*, const T*, T*, size_t);             \
  template __global__ void reduceChunkKernel<T, OpPreMulSum<T>>(OpPreMulSum<T>, const T*, const T*, T*, size_t);
GYRE_CHECK_NARROW_FLOAT(Half)
GYRE_CHECK_NARROW_FLOAT(Bfloat16)
GYRE_CHECK_NARROW_FLOAT(Fp8E4M3)
GYRE_CHECK_NARROW_FLOAT(Fp8E5M2)
#undef GYRE_CHECK_NARROW_FLOAT

}  // namespace gyre
