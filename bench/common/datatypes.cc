#include "datatypes.h"

#include <cmath>
#include <cstring>

namespace gyre_bench {
namespace {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;     // printed in the table (nccl-tests spelling)
  const char* aliases;  // also accepted by -d, space separated
  size_t size;
};

// Order is the order "-d all" runs them in.
constexpr TypeInfo kTypes[] = {
    {ncclInt8, "int8", "char", 1},
    {ncclUint8, "uint8", "", 1},
    {ncclInt32, "int32", "int", 4},
    {ncclUint32, "uint32", "", 4},
    {ncclInt64, "int64", "", 8},
    {ncclUint64, "uint64", "", 8},
    {ncclFloat16, "half", "float16 fp16", 2},
    {ncclFloat32, "float", "float32 fp32", 4},
    {ncclFloat64, "double", "float64 fp64", 8},
    {ncclBfloat16, "bfloat16", "bf16", 2},
    {ncclFloat8e4m3, "f8e4m3", "fp8_e4m3 float8e4m3", 1},
    {ncclFloat8e5m2, "f8e5m2", "fp8_e5m2 float8e5m2", 1},
};

struct OpInfo {
  ncclRedOp_t op;
  const char* name;
};
constexpr OpInfo kOps[] = {
    {ncclSum, "sum"}, {ncclProd, "prod"}, {ncclMax, "max"}, {ncclMin, "min"}, {ncclAvg, "avg"}};

const TypeInfo* findType(ncclDataType_t type) {
  for (const TypeInfo& t : kTypes)
    if (t.type == type) return &t;
  return nullptr;
}

bool nameInList(const std::string& name, const char* list) {
  std::string padded = std::string(" ") + list + " ";
  return !name.empty() && padded.find(" " + name + " ") != std::string::npos;
}

// IEEE binary16 from a float that holds a small integer. Truncating the
// mantissa is exact for the integers the benchmarks store (< 2048).
uint16_t floatToHalfBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  if ((bits & 0x7fffffff) == 0) return sign;
  int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  if (exp >= 31) return sign | 0x7c00;  // beyond half range: infinity
  if (exp <= 0) return sign;            // below half normals; never stored
  return sign | static_cast<uint16_t>(exp << 10) | static_cast<uint16_t>((bits >> 13) & 0x3ff);
}

double halfBitsToDouble(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  int mant = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(1024 + mant, exp - 25);
  return (h & 0x8000) ? -v : v;
}

// OCP FP8 bits from a small non-negative integer (or its negation), by
// truncation like floatToHalfBits. E4M3 (bias 7) has no infinities: its
// largest finite value is 448 and S.1111.111 is NaN. E5M2 (bias 15) is
// binary16 cut to one byte.
uint8_t integerToFp8Bits(int64_t value, int mantBits, int bias) {
  uint8_t sign = value < 0 ? 0x80 : 0;
  uint64_t v = value < 0 ? static_cast<uint64_t>(-value) : static_cast<uint64_t>(value);
  if (v == 0) return sign;
  int exp = 63 - __builtin_clzll(v);
  uint64_t mant = exp >= mantBits ? (v >> (exp - mantBits)) : (v << (mantBits - exp));
  mant &= (uint64_t{1} << mantBits) - 1;
  int biased = exp + bias;
  int maxBiased = mantBits == 3 ? 15 : 30;  // E4M3 uses exponent 15 for finite values
  if (biased > maxBiased) return sign | 0x7f;  // out of range: NaN (E4M3) / NaN (E5M2)
  return sign | static_cast<uint8_t>(biased << mantBits) | static_cast<uint8_t>(mant);
}

double fp8BitsToDouble(uint8_t b, int mantBits, int bias) {
  int expBits = 7 - mantBits;
  int exp = (b >> mantBits) & ((1 << expBits) - 1);
  int mant = b & ((1 << mantBits) - 1);
  double v;
  if (mantBits == 3 && exp == 15 && mant == 7) v = NAN;
  else if (mantBits == 2 && exp == 31) v = mant ? NAN : INFINITY;
  else if (exp == 0) v = std::ldexp(mant, 1 - bias - mantBits);
  else v = std::ldexp((1 << mantBits) + mant, exp - bias - mantBits);
  return (b & 0x80) ? -v : v;
}

template <typename T>
void put(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}
template <typename T>
T get(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

double loadFloat(const void* buf, size_t i, ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return halfBitsToDouble(get<uint16_t>(buf, i));
    case ncclBfloat16: {
      uint32_t bits = static_cast<uint32_t>(get<uint16_t>(buf, i)) << 16;
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    case ncclFloat32: return get<float>(buf, i);
    case ncclFloat64: return get<double>(buf, i);
    case ncclFloat8e4m3: return fp8BitsToDouble(get<uint8_t>(buf, i), 3, 7);
    case ncclFloat8e5m2: return fp8BitsToDouble(get<uint8_t>(buf, i), 2, 15);
    default: return NAN;
  }
}

}  // namespace

size_t typeSize(ncclDataType_t type) {
  const TypeInfo* t = findType(type);
  return t ? t->size : 0;
}

const char* typeName(ncclDataType_t type) {
  const TypeInfo* t = findType(type);
  return t ? t->name : "?";
}

bool isFloatType(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclBfloat16 || type == ncclFloat32 ||
         type == ncclFloat64 || type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}

bool isSignedType(ncclDataType_t type) {
  return type == ncclInt8 || type == ncclInt32 || type == ncclInt64 || isFloatType(type);
}

const char* opName(ncclRedOp_t op) {
  for (const OpInfo& o : kOps)
    if (o.op == op) return o.name;
  return "?";
}

bool parseTypes(const std::string& name, std::vector<ncclDataType_t>* out) {
  out->clear();
  for (const TypeInfo& t : kTypes)
    if (name == "all" || name == t.name || nameInList(name, t.aliases)) out->push_back(t.type);
  return !out->empty();
}

bool parseOps(const std::string& name, std::vector<ncclRedOp_t>* out) {
  out->clear();
  for (const OpInfo& o : kOps)
    if (name == "all" || name == o.name) out->push_back(o.op);
  return !out->empty();
}

std::string typeNameList() {
  std::string s;
  for (const TypeInfo& t : kTypes) {
    s += t.name;
    if (*t.aliases) s += std::string(" (") + t.aliases + ")";
    s += ", ";
  }
  return s + "all";
}

std::string opNameList() {
  std::string s;
  for (const OpInfo& o : kOps) s += std::string(o.name) + ", ";
  return s + "all";
}

void storeInteger(void* buf, size_t i, ncclDataType_t type, int64_t value) {
  // Integer stores keep the low bits: conversion to an unsigned type is
  // defined modulo 2^bits, and the signed types share the same bits.
  uint64_t u = static_cast<uint64_t>(value);
  switch (type) {
    case ncclInt8:
    case ncclUint8: put<uint8_t>(buf, i, static_cast<uint8_t>(u)); break;
    case ncclInt32:
    case ncclUint32: put<uint32_t>(buf, i, static_cast<uint32_t>(u)); break;
    case ncclInt64:
    case ncclUint64: put<uint64_t>(buf, i, u); break;
    case ncclFloat16: put<uint16_t>(buf, i, floatToHalfBits(static_cast<float>(value))); break;
    case ncclBfloat16: {
      float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      put<uint16_t>(buf, i, static_cast<uint16_t>(bits >> 16));
      break;
    }
    case ncclFloat32: put<float>(buf, i, static_cast<float>(value)); break;
    case ncclFloat64: put<double>(buf, i, static_cast<double>(value)); break;
    case ncclFloat8e4m3: put<uint8_t>(buf, i, integerToFp8Bits(value, 3, 7)); break;
    case ncclFloat8e5m2: put<uint8_t>(buf, i, integerToFp8Bits(value, 2, 15)); break;
    default: break;
  }
}

bool elementEquals(const void* buf, size_t i, ncclDataType_t type, int64_t expected,
                   double relTol) {
  if (isFloatType(type)) {
    double got = loadFloat(buf, i, type);
    double want = static_cast<double>(expected);
    if (relTol == 0) return got == want;
    return std::fabs(got - want) <= relTol * std::fmax(1.0, std::fabs(want));
  }
  uint64_t want = static_cast<uint64_t>(expected);
  switch (typeSize(type)) {
    case 1: return get<uint8_t>(buf, i) == static_cast<uint8_t>(want);
    case 4: return get<uint32_t>(buf, i) == static_cast<uint32_t>(want);
    case 8: return get<uint64_t>(buf, i) == want;
    default: return false;
  }
}

double typeEpsilon(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return std::ldexp(1.0, -10);
    case ncclBfloat16: return std::ldexp(1.0, -7);
    case ncclFloat32: return std::ldexp(1.0, -23);
    case ncclFloat64: return std::ldexp(1.0, -52);
    case ncclFloat8e4m3: return std::ldexp(1.0, -3);
    case ncclFloat8e5m2: return std::ldexp(1.0, -2);
    default: return 0;
  }
}

int64_t exactLimit(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return INT8_MAX;
    case ncclUint8: return UINT8_MAX;
    case ncclInt32: return INT32_MAX;
    case ncclUint32: return UINT32_MAX;
    case ncclFloat16: return int64_t{1} << 11;
    case ncclBfloat16: return int64_t{1} << 8;
    case ncclFloat32: return int64_t{1} << 24;
    case ncclFloat64: return int64_t{1} << 53;
    case ncclFloat8e4m3: return int64_t{1} << 4;
    case ncclFloat8e5m2: return int64_t{1} << 3;
    default: return INT64_MAX;  // int64, uint64 (the int64 carrier's limit)
  }
}

}  // namespace gyre_bench
