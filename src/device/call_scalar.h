// The custom-operator part of a device call, filled the same way by the
// kernel executor (kernel_calls.cc) and the direct one (direct_calls.cc).
#pragma once

#include <cstring>

#include "src/comm/comm.h"
#include "src/enqueue/arg_checks.h"
#include "src/enqueue/enqueue.h"

namespace gyre {

// A custom PreMulSum's scalar for a device call (DeviceCall, DirectCall):
// its device pointer (ncclScalarDevice, read when the kernel starts) or its
// value. Nothing for built-in operators.
template <typename Call>
void setCallScalar(const ncclComm* comm, const PendingCall& c, Call* d) {
  if (c.op < ncclNumOps) return;
  const CustomRedOp& custom = comm->customOps[c.op - ncclNumOps];
  d->hasScalar = 1;
  if (custom.scalarPtr) d->scalarPtr = custom.scalarPtr;
  else memcpy(d->scalar, custom.value, datatypeSize(c.datatype));
}

}  // namespace gyre
