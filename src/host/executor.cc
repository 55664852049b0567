#include "src/host/executor.h"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/primitives/reduce_op.h"

namespace gyre {
namespace {

template <typename T, typename Op>
std::unique_ptr<Lane> typed(const LaneSpec& spec, Op op) {
  return std::make_unique<TypedLane<T, Op>>(spec, op);
}

template <typename T>
ncclResult_t makeLaneWithType(const LaneSpec& spec, std::unique_ptr<Lane>* out) {
  switch (spec.op) {
    case ncclSum: *out = typed<T>(spec, OpSum<T>{}); return ncclSuccess;
    case ncclProd: *out = typed<T>(spec, OpProd<T>{}); return ncclSuccess;
    case ncclMax: *out = typed<T>(spec, OpMax<T>{}); return ncclSuccess;
    case ncclMin: *out = typed<T>(spec, OpMin<T>{}); return ncclSuccess;
    case ncclAvg:
      // Floating point: scale each input by 1/n before summing (as NCCL does),
      // so large sums do not overflow; integers: exact sum, then one division.
      if constexpr (std::is_floating_point_v<T>)
        *out = typed<T>(spec, OpPreMulSum<T>{static_cast<T>(1.0 / spec.comm->nranks)});
      else if constexpr (kIsNarrowFloat<T>)  // 1/n rounded to float, then to T, as NCCL
        *out = typed<T>(spec, OpPreMulSum<T>{T::fromFloat(static_cast<float>(1.0 / spec.comm->nranks))});
      else
        *out = typed<T>(spec, OpSumPostDiv<T>{spec.comm->nranks});
      return ncclSuccess;
    default:
      if (spec.hasScalar) {
        T scalar;
        memcpy(&scalar, spec.scalar, sizeof(T));
        *out = typed<T>(spec, OpPreMulSum<T>{scalar});
        return ncclSuccess;
      }
      return fail(ncclInvalidArgument, "%s: op %d is not supported", collName(spec.coll), spec.op);
  }
}

}  // namespace

ncclResult_t makeHostLane(const LaneSpec& spec, std::unique_ptr<Lane>* out) {
  switch (spec.datatype) {
    case ncclInt8: return makeLaneWithType<int8_t>(spec, out);
    case ncclUint8: return makeLaneWithType<uint8_t>(spec, out);
    case ncclInt32: return makeLaneWithType<int32_t>(spec, out);
    case ncclUint32: return makeLaneWithType<uint32_t>(spec, out);
    case ncclInt64: return makeLaneWithType<int64_t>(spec, out);
    case ncclUint64: return makeLaneWithType<uint64_t>(spec, out);
    case ncclFloat32: return makeLaneWithType<float>(spec, out);
    case ncclFloat64: return makeLaneWithType<double>(spec, out);
    case ncclFloat16: return makeLaneWithType<Half>(spec, out);
    case ncclBfloat16: return makeLaneWithType<Bfloat16>(spec, out);
    case ncclFloat8e4m3: return makeLaneWithType<Fp8E4M3>(spec, out);
    case ncclFloat8e5m2: return makeLaneWithType<Fp8E5M2>(spec, out);
    default: return fail(ncclInvalidArgument, "%s: datatype %d is not supported", collName(spec.coll), spec.datatype);
  }
}

ncclResult_t reuseHostLane(const LaneSpec& spec, std::unique_ptr<Lane>* lane) {
  if (*lane && (*lane)->reusableFor(spec)) {
    (*lane)->rebind(spec);
    return ncclSuccess;
  }
  return makeHostLane(spec, lane);
}

}  // namespace gyre
