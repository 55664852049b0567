#include "types.h"

#include <c10/util/Exception.h>

#include "communicator.h"

namespace torch_gyre {

ncclDataType_t toNcclType(at::ScalarType type, const char* what) {
  switch (type) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    default: break;
  }
  TORCH_CHECK(false, "gyre backend: ", what, " does not support tensors of dtype ", c10::toString(type),
              " (supported: float32, float64, float16, bfloat16, int8, uint8, int32, int64)");
}

std::string opName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "ReduceOp(" + std::to_string(static_cast<int>(op.op_)) + ")";
  }
}

void checkOp(const c10d::ReduceOp& op, const char* what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::PRODUCT:
    case c10d::ReduceOp::MIN:
    case c10d::ReduceOp::MAX:
    case c10d::ReduceOp::AVG:
    case c10d::ReduceOp::PREMUL_SUM:
      return;
    default:
      TORCH_CHECK(false, "gyre backend: ", what, " does not support ReduceOp ", opName(op),
                  " (supported: SUM, PRODUCT, MIN, MAX, AVG, PREMUL_SUM)");
  }
}

ncclRedOp_t opFor(const c10d::ReduceOp& op, at::ScalarType type, ncclComm_t comm,
                  std::vector<std::function<void()>>& cleanups, const char* what) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ncclSum;
    case c10d::ReduceOp::PRODUCT: return ncclProd;
    case c10d::ReduceOp::MIN: return ncclMin;
    case c10d::ReduceOp::MAX: return ncclMax;
    case c10d::ReduceOp::AVG: return ncclAvg;
    case c10d::ReduceOp::PREMUL_SUM: break;
    default: checkOp(op, what);
  }
  double factor = 0;
  at::Tensor tensorFactor;
  TORCH_CHECK(compat::preMulFactor(op, &factor, &tensorFactor), "gyre backend: ", what,
              ": PREMUL_SUM without a factor (make it with torch.distributed._make_nccl_premul_sum)");
  // gyre wants the scalar in the reduction's own type; converting through a
  // one-element tensor gives torch's rounding for every type.
  at::Tensor scalar = tensorFactor.defined()
                          ? tensorFactor.detach().to(at::kCPU).reshape({1}).to(type).contiguous()
                          : at::full({1}, factor, at::TensorOptions().dtype(type));
  ncclDataType_t t = toNcclType(type, what);
  ncclRedOp_t created;
  check(ncclRedOpCreatePreMulSum(&created, scalar.data_ptr(), t, ncclScalarHostImmediate, comm),
        "ncclRedOpCreatePreMulSum", comm);
  cleanups.push_back([created, comm] { ncclRedOpDestroy(created, comm); });
  return created;
}

}  // namespace torch_gyre
