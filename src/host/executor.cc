#include "src/host/executor.h"

#include "src/kernels/primitives/op_dispatch.h"

namespace gyre {

ncclResult_t makeHostLane(const LaneSpec& spec, HostComm* comm, std::unique_ptr<Lane>* out) {
  OpParams params{spec.nranks, spec.hasScalar, spec.scalar};
  ncclResult_t r = visitTypedOp(spec.datatype, spec.op, params, [&](auto op) {
    using Op = decltype(op);
    *out = std::make_unique<TypedLane<typename Op::Elem, Op>>(spec, comm, op);
    return ncclSuccess;
  });
  if (r != ncclSuccess)
    return fail(ncclInvalidArgument, "%s: datatype %d with op %d is not supported", collName(spec.coll),
                spec.datatype, spec.op);
  return ncclSuccess;
}

ncclResult_t reuseHostLane(const LaneSpec& spec, HostComm* comm, std::unique_ptr<Lane>* lane) {
  if (*lane && (*lane)->reusableFor(spec)) {
    (*lane)->rebind(spec, comm);
    return ncclSuccess;
  }
  return makeHostLane(spec, comm, lane);
}

}  // namespace gyre
