// The flag kernel's operations (src/kernels/flag_work.h), written once for
// CUDA (src/kernels/flag_kernel.cu, one thread) and for the host emulation of
// the tests' fake CUDA runtime (tests/support/fake_cuda/host_emulation.cc).
// `Ctx` supplies flag loads and stores, a system-wide fence, a clock and a
// pause.
//
// Writes follow a system-wide fence, so what this rank's stream did before
// (a copy kernel's stores) is visible to whoever sees the flag; waits poll
// with a pause so a waiting kernel leaves its SM's issue slots to the
// kernels it waits for, and give up on abort or after ops.timeoutNs by the
// context's clock (%globaltimer on the GPU), reported through mapped host
// memory.
#pragma once

#include <cstdint>

#include "src/kernels/flag_work.h"
#include "src/kernels/primitives/host_device.h"

namespace gyre {

template <typename Ctx>
GYRE_HOST_DEVICE void storeFlagAfterFence(const Ctx& ctx, uint32_t* flag, uint32_t value) {
  ctx.fenceSystem();
  ctx.store(flag, value);
}

// Until `op` is reached; false when the wait stopped (abort, or this or
// another wait timed out). A wait longer than ops.timeoutNs sets
// stopOnTimeout, then reports the step and the peer in ops.timedOut
// (src/kernels/flag_work.h).
template <typename Ctx>
GYRE_HOST_DEVICE bool waitFlag(const Ctx& ctx, const FlagOps& ops, const FlagOp& op) {
  const uint64_t start = ctx.nowNs();
  while (!flagReached(ctx.load(op.flag), op.value)) {
    if (flagWaitStopped(ops)) return false;
    if (ops.timeoutNs && ctx.nowNs() - start > ops.timeoutNs) {
      if (ops.stopOnTimeout) storeFlagAfterFence(ctx, ops.stopOnTimeout, 1);
      if (ops.timedOut) {
        ops.timedOut->step = op.step;
        ctx.fenceSystem();  // the step before the peer, which the host polls
        storeSharedWord(&ops.timedOut->peerPlusOne, static_cast<uint32_t>(op.peer + 1));
      }
      return false;
    }
    ctx.pause();
  }
  return true;
}

template <typename Ctx>
GYRE_HOST_DEVICE void runFlagOps(const Ctx& ctx, const FlagOps& ops) {
  for (int i = 0; i < ops.n; ++i) {
    const FlagOp& op = ops.ops[i];
    if (op.kind == FlagOpKind::kWrite) {
      storeFlagAfterFence(ctx, op.flag, op.value);
      continue;
    }
    if (!waitFlag(ctx, ops, op)) return;
    ctx.fenceSystem();
    if (op.kind == FlagOpKind::kWaitAndClear) storeFlagAfterFence(ctx, op.flag, 0);
  }
}

}  // namespace gyre
