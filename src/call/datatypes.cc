#include "src/call/datatypes.h"

namespace gyre {

const char* datatypeName(int type) {
  static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  return type >= 0 && type < ncclNumTypes ? names[type] : "invalid";
}

const char* redOpName(int op) {
  static const char* names[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < ncclNumOps ? names[op] : "custom";
}

}  // namespace gyre
