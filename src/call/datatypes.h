// Sizes and names of NCCL's datatypes and operators: facts every layer that
// describes or runs a call needs (messages, byte counts), owned by none of them.
#pragma once

#include <cstddef>

#include "include/gyre.h"

namespace gyre {

// Size in bytes of a datatype, 0 if the value is not a datatype. Inline:
// every call asks it several times (checks, counters, the repeat key).
inline size_t datatypeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}
// Names of a datatype and an operator. They take any integer: the value may
// have come from a peer or the C API, and a value outside the enum must not
// be converted to it first (that is undefined in C++).
const char* datatypeName(int type);
const char* redOpName(int op);

}  // namespace gyre
