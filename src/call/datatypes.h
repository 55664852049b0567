// Sizes and names of NCCL's datatypes and operators: facts every layer that
// describes or runs a call needs (messages, byte counts), owned by none of them.
#pragma once

#include <cstddef>

#include "include/gyre.h"

namespace gyre {

// Size in bytes of a datatype, 0 if the value is not a datatype.
size_t datatypeSize(ncclDataType_t type);
// Names of a datatype and an operator. They take any integer: the value may
// have come from a peer or the C API, and a value outside the enum must not
// be converted to it first (that is undefined in C++).
const char* datatypeName(int type);
const char* redOpName(int op);

}  // namespace gyre
