// C API: NCCL's parameter API over gyre's settings registry
// (src/config/env_registry.cc). A key is a variable's name, with or without
// its NCCL_ prefix ("NCCL_BUFFSIZE" or "BUFFSIZE"; gyre's own settings keep
// their GYRE_ prefix). A handle is the registry entry itself, so it stays
// valid for the life of the process and needs no freeing.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/comm/api_export.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/fork_guard.h"
#include "src/debug/log.h"

using namespace gyre;

namespace {

const env::VarSpec* specOf(ncclParamHandle_t h) { return reinterpret_cast<const env::VarSpec*>(h); }

// The registry entry of a key, or NULL.
const env::VarSpec* lookupKey(const char* key) {
  if (const env::VarSpec* s = env::find(key)) return s;
  return env::find(std::string("NCCL_") + key);
}

ncclResult_t checkHandle(ncclParamHandle_t h, const char* fn) {
  GYRE_CHECK(checkNotForkedChild(fn));
  for (const env::VarSpec& s : env::registry())
    if (&s == specOf(h)) return ncclSuccess;
  return fail(ncclInvalidArgument, "%s: handle %p was not made by ncclParamBind", fn, static_cast<void*>(h));
}

bool isNumeric(const env::VarSpec& s) { return s.type == env::Type::Int || s.type == env::Type::Bytes; }

// A numeric setting's value, checked to fit T.
template <typename T>
ncclResult_t getTyped(ncclParamHandle_t h, T* out, const char* fn, const char* typeName) {
  GYRE_CHECK(checkHandle(h, fn));
  if (!out) return fail(ncclInvalidArgument, "%s: out is NULL", fn);
  const env::VarSpec& s = *specOf(h);
  if (!isNumeric(s))
    return fail(ncclInvalidUsage, "%s: %s is a text setting (read it with ncclParamGetStr)", fn, s.name);
  int64_t v = 0;
  GYRE_CHECK(env::getInt(s.name, &v));
  bool fits = std::numeric_limits<T>::is_signed
                  ? v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                        v <= static_cast<int64_t>(std::numeric_limits<T>::max())
                  : v >= 0 && static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
  if (!fits)
    return fail(ncclInvalidArgument, "%s: %s is %lld, which does not fit %s", fn, s.name, static_cast<long long>(v),
                typeName);
  *out = static_cast<T>(v);
  return ncclSuccess;
}

}  // namespace

GYRE_EXPORT ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  const char* fn = "ncclParamBind";
  GYRE_CHECK(checkNotForkedChild(fn));
  if (!out) return fail(ncclInvalidArgument, "%s: out is NULL", fn);
  *out = nullptr;
  if (!key) return fail(ncclInvalidArgument, "%s: key is NULL", fn);
  const env::VarSpec* s = lookupKey(key);
  if (!s) {
    std::string near = env::nearestName(key);
    if (near.empty()) near = env::nearestName(std::string("NCCL_") + key);
    return fail(ncclInvalidArgument, "%s: gyre has no setting '%s'%s%s", fn, key,
                near.empty() ? "" : "; did you mean ", near.c_str());
  }
  *out = reinterpret_cast<ncclParamHandle_t>(const_cast<env::VarSpec*>(s));
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out) {
  return getTyped(h, out, "ncclParamGetI8", "int8_t");
}
GYRE_EXPORT ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out) {
  return getTyped(h, out, "ncclParamGetI16", "int16_t");
}
GYRE_EXPORT ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out) {
  return getTyped(h, out, "ncclParamGetI32", "int32_t");
}
GYRE_EXPORT ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out) {
  return getTyped(h, out, "ncclParamGetI64", "int64_t");
}
GYRE_EXPORT ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out) {
  return getTyped(h, out, "ncclParamGetU8", "uint8_t");
}
GYRE_EXPORT ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out) {
  return getTyped(h, out, "ncclParamGetU16", "uint16_t");
}
GYRE_EXPORT ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out) {
  return getTyped(h, out, "ncclParamGetU32", "uint32_t");
}
GYRE_EXPORT ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out) {
  return getTyped(h, out, "ncclParamGetU64", "uint64_t");
}

GYRE_EXPORT ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  const char* fn = "ncclParamGetStr";
  GYRE_CHECK(checkHandle(h, fn));
  if (!out) return fail(ncclInvalidArgument, "%s: out is NULL", fn);
  thread_local std::string text;
  text = env::getString(specOf(h)->name);
  *out = text.c_str();
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  const char* fn = "ncclParamGet";
  GYRE_CHECK(checkHandle(h, fn));
  if (!out || !len) return fail(ncclInvalidArgument, "%s: %s is NULL", fn, out ? "len" : "out");
  const env::VarSpec& s = *specOf(h);
  std::vector<char> bytes;
  if (isNumeric(s)) {
    int64_t v = 0;
    GYRE_CHECK(env::getInt(s.name, &v));
    bytes.resize(sizeof(v));
    memcpy(bytes.data(), &v, sizeof(v));
  } else {
    std::string text = env::getString(s.name);
    bytes.assign(text.c_str(), text.c_str() + text.size() + 1);
  }
  *len = static_cast<int>(bytes.size());
  if (maxLen < *len)
    return fail(ncclInvalidArgument, "%s: %s needs %d bytes, maxLen is %d", fn, s.name, *len, maxLen);
  memcpy(out, bytes.data(), bytes.size());
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  const char* fn = "ncclParamGetParameter";
  if (!value || !valueLen) return fail(ncclInvalidArgument, "%s: %s is NULL", fn, value ? "valueLen" : "value");
  ncclParamHandle_t h = nullptr;
  GYRE_CHECK(ncclParamBind(&h, key));
  thread_local std::string text;
  text = env::getString(specOf(h)->name);
  *value = text.c_str();
  *valueLen = static_cast<int>(text.size());
  return ncclSuccess;
}

GYRE_EXPORT ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  const char* fn = "ncclParamGetAllParameterKeys";
  if (!table || !tableLen) return fail(ncclInvalidArgument, "%s: %s is NULL", fn, table ? "tableLen" : "table");
  thread_local std::vector<const char*> keys;
  keys.clear();
  for (const env::VarSpec& s : env::registry()) keys.push_back(s.name);
  *table = keys.data();
  *tableLen = static_cast<int>(keys.size());
  return ncclSuccess;
}

GYRE_EXPORT void ncclParamDumpAll(void) {
  if (inForkedChild()) return;  // logging takes locks the parent's threads may hold
  for (const env::VarSpec& s : env::registry()) {
    env::Setting set = env::lookup(s.name);
    GYRE_INFO("ENV", "%s=%s (%s%s%s)", s.name, set.value.c_str(), env::sourceName(set.source),
              set.origin.empty() ? "" : " ", set.origin.c_str());
  }
}
