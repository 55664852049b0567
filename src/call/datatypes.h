// Sizes and names of NCCL's datatypes and operators: facts every layer that
// describes or runs a call needs (messages, byte counts), owned by none of them.
#pragma once

#include <cstddef>

#include "include/gyre.h"

namespace gyre {

// Size in bytes of a datatype, 0 if the value is not a datatype.
size_t datatypeSize(ncclDataType_t type);
const char* datatypeName(ncclDataType_t type);
const char* redOpName(ncclRedOp_t op);

}  // namespace gyre
