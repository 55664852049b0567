#include "src/host/executor.h"

#include <cstdint>
#include <type_traits>

#include "kernels/primitives/reduce_op.h"
#include "src/host/step_runner.h"

namespace gyre {
namespace {

template <typename T, typename Op>
ncclResult_t runWith(ncclComm* comm, const CollCall& call, Channel& ch, const ChannelSchedule& s, Op op) {
  StepRunner<T, Op> runner(comm, call, ch, op);
  return runner.run(s.steps.data(), s.steps.size());
}

template <typename T>
ncclResult_t runWithType(ncclComm* comm, const CollCall& call, Channel& ch, const ChannelSchedule& s) {
  switch (call.op) {
    case ncclSum: return runWith<T>(comm, call, ch, s, OpSum<T>{});
    case ncclProd: return runWith<T>(comm, call, ch, s, OpProd<T>{});
    case ncclMax: return runWith<T>(comm, call, ch, s, OpMax<T>{});
    case ncclMin: return runWith<T>(comm, call, ch, s, OpMin<T>{});
    case ncclAvg:
      // Floating point: scale each input by 1/n before summing (as NCCL does),
      // so large sums do not overflow; integers: exact sum, then one division.
      if constexpr (std::is_floating_point_v<T>)
        return runWith<T>(comm, call, ch, s, OpPreMulSum<T>{static_cast<T>(1.0 / comm->nranks)});
      else
        return runWith<T>(comm, call, ch, s, OpSumPostDiv<T>{comm->nranks});
    default: return fail(ncclInvalidArgument, "%s: op %d is not supported", collName(call.coll), call.op);
  }
}

}  // namespace

ncclResult_t runHostSchedule(ncclComm* comm, const CollCall& call, Channel& ch, const ChannelSchedule& s) {
  switch (call.datatype) {
    case ncclInt8: return runWithType<int8_t>(comm, call, ch, s);
    case ncclUint8: return runWithType<uint8_t>(comm, call, ch, s);
    case ncclInt32: return runWithType<int32_t>(comm, call, ch, s);
    case ncclUint32: return runWithType<uint32_t>(comm, call, ch, s);
    case ncclInt64: return runWithType<int64_t>(comm, call, ch, s);
    case ncclUint64: return runWithType<uint64_t>(comm, call, ch, s);
    case ncclFloat32: return runWithType<float>(comm, call, ch, s);
    case ncclFloat64: return runWithType<double>(comm, call, ch, s);
    default:
      return fail(ncclInvalidArgument, "%s: datatype %d is not supported on host communicators yet",
                  collName(call.coll), call.datatype);
  }
}

}  // namespace gyre
