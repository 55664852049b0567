#include "src/device/flag_ops.h"

#include "src/debug/error.h"

namespace gyre {

ncclResult_t enqueueFlagOps(const FlagOps& ops, StreamHandle stream, FlagRunner runner) {
  DeviceRuntime* rt = deviceRuntime();
  if (ops.n == 0) return ncclSuccess;
  if (runner == FlagRunner::kKernel) return rt->launchFlagOps(ops, stream);
  for (int i = 0; i < ops.n; ++i) {
    const FlagOp& op = ops.ops[i];
    if (op.kind == FlagOpKind::kWrite) {
      GYRE_CHECK(rt->streamWriteFlag(stream, op.flag, op.value));
      continue;
    }
    GYRE_CHECK(rt->streamWaitFlag(stream, op.flag, op.value));
    if (op.kind == FlagOpKind::kWaitAndClear) GYRE_CHECK(rt->streamWriteFlag(stream, op.flag, 0));
  }
  return ncclSuccess;
}

}  // namespace gyre
