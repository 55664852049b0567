// Names, sizes and element conversions for NCCL data types and reduction ops,
// shared by every benchmark binary. The benchmarks parse the nccl-tests names
// (-d float, -o sum, ...) and print them back in the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gyre.h"

namespace gyre_bench {

// Bytes per element, or 0 for a type value gyre.h does not define.
size_t typeSize(ncclDataType_t type);
// Name printed in the table's "type" column (nccl-tests spelling).
const char* typeName(ncclDataType_t type);
bool isFloatType(ncclDataType_t type);
bool isSignedType(ncclDataType_t type);

const char* opName(ncclRedOp_t op);

// Parses a comma-free single name such as "float", "float32", "int8"; "all"
// expands to every type the benchmarks know. Returns false for an unknown name.
bool parseTypes(const std::string& name, std::vector<ncclDataType_t>* out);
// Same for ops: "sum", "prod", "max", "min", "avg", or "all".
bool parseOps(const std::string& name, std::vector<ncclRedOp_t>* out);
// Names accepted by parseTypes/parseOps, for --help and error messages.
std::string typeNameList();
std::string opNameList();

// Element access by runtime type. The benchmarks only ever store integers
// (check.h picks them so every reduction stays exact), so an int64 carries any
// element: integer types keep its low bits (two's complement wraparound, the
// same arithmetic the library does), float types get its exact value. half and
// bfloat16 are encoded by hand so no compiler extension types are needed.
void storeInteger(void* buf, size_t index, ncclDataType_t type, int64_t value);
// True when element `index` equals `expected` stored as `type`. For float
// types a relative tolerance may be given (averages of premultiplied inputs
// are not always exact); 0 means exact.
bool elementEquals(const void* buf, size_t index, ncclDataType_t type, int64_t expected,
                   double relTol);
// Relative rounding step of a float type (0 for integer types).
double typeEpsilon(ncclDataType_t type);
// Largest integer below which every integer is exactly representable and no
// wraparound happens: 2^mantissa for floats, the signed/unsigned max for ints.
int64_t exactLimit(ncclDataType_t type);

}  // namespace gyre_bench
