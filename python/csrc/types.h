// Maps torch's dtypes and ReduceOps onto gyre's (NCCL's) enums, and refuses
// what gyre cannot reduce with a message naming the dtype or op.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gyre.h>

#include "compat.h"

namespace torch_gyre {

// Throws (TORCH_CHECK, a RuntimeError in Python) naming `what` and the dtype
// when gyre has no such data type.
ncclDataType_t toNcclType(at::ScalarType type, const char* what);

// Refuses an operator gyre lacks (BAND, BOR, BXOR), naming it, before
// anything is queued.
void checkOp(const c10d::ReduceOp& op, const char* what);

// The gyre operator for one launch on `comm`. Built-ins map directly;
// PREMUL_SUM creates an operator holding the factor in the tensor's type
// (ncclRedOpCreatePreMulSum) and adds its destruction to `cleanups`, which
// the queue runs once the group that uses it has ended.
ncclRedOp_t opFor(const c10d::ReduceOp& op, at::ScalarType type, ncclComm_t comm,
                  std::vector<std::function<void()>>& cleanups, const char* what);

std::string opName(const c10d::ReduceOp& op);

}  // namespace torch_gyre
