// From a call's runtime datatype and operator to the typed operator the
// element loops are compiled for: visit(op) is called with OpSum<float>,
// OpPreMulSum<Half>, ... (each op's element type is Op::Elem). Shared by the
// host executor, the CUDA kernel launcher and its host emulation, so every
// executor maps (type, op) to the same arithmetic.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "include/gyre.h"
#include "src/kernels/primitives/reduce_op.h"

namespace gyre {

// What a typed operator needs besides (type, op): the rank count (average)
// and a PreMulSum scalar as bytes of the datatype.
struct OpParams {
  int nranks = 1;
  bool hasScalar = false;
  const unsigned char* scalar = nullptr;
};

// Returns ncclInvalidArgument (without recording text: callers name the
// call) when the pair has no typed operator.
template <typename T, typename Visit>
ncclResult_t visitOpOfType(ncclRedOp_t op, const OpParams& p, Visit&& visit) {
  switch (op) {
    case ncclSum: return visit(OpSum<T>{});
    case ncclProd: return visit(OpProd<T>{});
    case ncclMax: return visit(OpMax<T>{});
    case ncclMin: return visit(OpMin<T>{});
    case ncclAvg:
      // Floating point: scale each input by 1/n before summing (as NCCL does),
      // so large sums do not overflow; integers: exact sum, then one division.
      if constexpr (std::is_floating_point_v<T>)
        return visit(OpPreMulSum<T>{static_cast<T>(1.0 / p.nranks)});
      else if constexpr (kIsNarrowFloat<T>)  // 1/n rounded to float, then to T, as NCCL
        return visit(OpPreMulSum<T>{T::fromFloat(static_cast<float>(1.0 / p.nranks))});
      else
        return visit(OpSumPostDiv<T>{p.nranks});
    default:
      if (p.hasScalar) {
        T scalar;
        memcpy(&scalar, p.scalar, sizeof(T));
        return visit(OpPreMulSum<T>{scalar});
      }
      return ncclInvalidArgument;
  }
}

template <typename Visit>
ncclResult_t visitTypedOp(ncclDataType_t type, ncclRedOp_t op, const OpParams& p, Visit&& visit) {
  switch (type) {
    case ncclInt8: return visitOpOfType<int8_t>(op, p, visit);
    case ncclUint8: return visitOpOfType<uint8_t>(op, p, visit);
    case ncclInt32: return visitOpOfType<int32_t>(op, p, visit);
    case ncclUint32: return visitOpOfType<uint32_t>(op, p, visit);
    case ncclInt64: return visitOpOfType<int64_t>(op, p, visit);
    case ncclUint64: return visitOpOfType<uint64_t>(op, p, visit);
    case ncclFloat32: return visitOpOfType<float>(op, p, visit);
    case ncclFloat64: return visitOpOfType<double>(op, p, visit);
    case ncclFloat16: return visitOpOfType<Half>(op, p, visit);
    case ncclBfloat16: return visitOpOfType<Bfloat16>(op, p, visit);
    case ncclFloat8e4m3: return visitOpOfType<Fp8E4M3>(op, p, visit);
    case ncclFloat8e5m2: return visitOpOfType<Fp8E5M2>(op, p, visit);
    default: return ncclInvalidArgument;
  }
}

// The typed operator of a device call (DeviceCall, DirectCall): its
// datatype, operator, rank count and scalar, as every executor reads them.
template <typename Call, typename Visit>
ncclResult_t visitCallOp(const Call& call, Visit&& visit) {
  OpParams params{call.nranks, call.hasScalar != 0, call.scalar};
  return visitTypedOp(static_cast<ncclDataType_t>(call.datatype), static_cast<ncclRedOp_t>(call.redop), params,
                      visit);
}

// A PreMulSum whose scalar lives in device memory (ncclScalarDevice) reads
// it when the kernel starts; other operators have no scalar.
template <typename Op>
GYRE_HOST_DEVICE void loadScalar(Op&, const void*) {}
template <typename T>
GYRE_HOST_DEVICE void loadScalar(OpPreMulSum<T>& op, const void* p) {
  if (p) op.scalar = *static_cast<const T*>(p);
}

}  // namespace gyre
