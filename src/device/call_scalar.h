// The custom-operator part of a device call, filled the same way by the
// kernel executor (kernel_calls.cc) and the direct one (direct_calls.cc).
#pragma once

#include <cstring>

#include "src/call/call.h"
#include "src/call/datatypes.h"

namespace gyre {

// A custom PreMulSum's scalar for a device call (DeviceCall, DirectCall):
// its device pointer (ncclScalarDevice, read when the kernel starts) or its
// value. Nothing for built-in operators.
template <typename Call>
void setCallScalar(const CollCall& c, Call* d) {
  if (!c.scalar.present) return;
  d->hasScalar = 1;
  if (c.scalar.devicePtr) d->scalarPtr = c.scalar.devicePtr;
  else memcpy(d->scalar, c.scalar.value, datatypeSize(c.datatype));
}

}  // namespace gyre
