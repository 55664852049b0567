// NCCL's parameter API (ncclParamBind, ncclParamGet*, ncclParamGetParameter,
// ncclParamGetAllParameterKeys, ncclParamDumpAll) over gyre's settings,
// through libgyre.so. The test's environment sets NCCL_BUFFSIZE=2M,
// NCCL_ALGO=Ring and NCCL_IB_GID_INDEX=-1 (meson.build).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "nccl.h"

namespace {

ncclParamHandle_t bind(const char* key) {
  ncclParamHandle_t h = nullptr;
  REQUIRE(ncclParamBind(&h, key) == ncclSuccess);
  REQUIRE(h != nullptr);
  return h;
}

std::string lastError() { return ncclGetLastError(nullptr); }

}  // namespace

TEST_CASE("a numeric setting reads as every integer type it fits, and is refused by those it does not") {
  ncclParamHandle_t h = bind("NCCL_BUFFSIZE");
  CHECK(bind("BUFFSIZE") == h);  // NCCL_ may be left out
  int64_t i64 = 0;
  uint64_t u64 = 0;
  int32_t i32 = 0;
  uint32_t u32 = 0;
  REQUIRE(ncclParamGetI64(h, &i64) == ncclSuccess);
  CHECK(i64 == 2 * 1024 * 1024);
  REQUIRE(ncclParamGetU64(h, &u64) == ncclSuccess);
  CHECK(u64 == 2097152u);
  REQUIRE(ncclParamGetI32(h, &i32) == ncclSuccess);
  CHECK(i32 == 2097152);
  REQUIRE(ncclParamGetU32(h, &u32) == ncclSuccess);
  CHECK(u32 == 2097152u);
  int16_t i16 = 5;
  uint16_t u16 = 5;
  int8_t i8 = 5;
  uint8_t u8 = 5;
  CHECK(ncclParamGetI16(h, &i16) == ncclInvalidArgument);
  CHECK(lastError().find("does not fit int16_t") != std::string::npos);
  CHECK(i16 == 5);  // untouched
  CHECK(ncclParamGetU16(h, &u16) == ncclInvalidArgument);
  CHECK(ncclParamGetI8(h, &i8) == ncclInvalidArgument);
  CHECK(ncclParamGetU8(h, &u8) == ncclInvalidArgument);

  // A negative value fits the signed types only.
  ncclParamHandle_t gid = bind("NCCL_IB_GID_INDEX");
  REQUIRE(ncclParamGetI8(gid, &i8) == ncclSuccess);
  CHECK(i8 == -1);
  REQUIRE(ncclParamGetI16(gid, &i16) == ncclSuccess);
  CHECK(i16 == -1);
  CHECK(ncclParamGetU8(gid, &u8) == ncclInvalidArgument);
  CHECK(ncclParamGetU64(gid, &u64) == ncclInvalidArgument);
  CHECK(lastError().find("NCCL_IB_GID_INDEX") != std::string::npos);

  // A small default fits every type.
  ncclParamHandle_t retry = bind("IB_RETRY_CNT");
  REQUIRE(ncclParamGetU8(retry, &u8) == ncclSuccess);
  CHECK(u8 == 7);
}

TEST_CASE("settings read as text and as bytes; text settings refuse the integer getters") {
  ncclParamHandle_t algo = bind("NCCL_ALGO");
  const char* text = nullptr;
  REQUIRE(ncclParamGetStr(algo, &text) == ncclSuccess);
  CHECK(std::string(text) == "Ring");
  int64_t v = 0;
  CHECK(ncclParamGetI64(algo, &v) == ncclInvalidUsage);
  CHECK(lastError().find("ncclParamGetStr") != std::string::npos);

  char bytes[16];
  int len = 0;
  REQUIRE(ncclParamGet(algo, bytes, sizeof bytes, &len) == ncclSuccess);
  CHECK(len == 5);
  CHECK(std::string(bytes) == "Ring");
  CHECK(ncclParamGet(algo, bytes, 3, &len) == ncclInvalidArgument);
  CHECK(len == 5);  // the length needed
  ncclParamHandle_t buff = bind("NCCL_BUFFSIZE");
  REQUIRE(ncclParamGet(buff, bytes, sizeof bytes, &len) == ncclSuccess);
  REQUIRE(len == 8);
  int64_t raw = 0;
  memcpy(&raw, bytes, sizeof raw);
  CHECK(raw == 2097152);
  REQUIRE(ncclParamGetStr(buff, &text) == ncclSuccess);
  CHECK(std::string(text) == "2M");

  const char* value = nullptr;
  int valueLen = -1;
  REQUIRE(ncclParamGetParameter("ALGO", &value, &valueLen) == ncclSuccess);
  CHECK(std::string(value) == "Ring");
  CHECK(valueLen == 4);
  REQUIRE(ncclParamGetParameter("NCCL_PROTO", &value, &valueLen) == ncclSuccess);
  CHECK(valueLen == 0);  // unset, no default
}

TEST_CASE("every setting is listed once, and each listed key binds") {
  const char** keys = nullptr;
  int n = 0;
  REQUIRE(ncclParamGetAllParameterKeys(&keys, &n) == ncclSuccess);
  REQUIRE(n >= 40);
  std::set<std::string> seen;
  for (int i = 0; i < n; ++i) {
    INFO(keys[i]);
    CHECK(seen.insert(keys[i]).second);
    ncclParamHandle_t h = nullptr;
    CHECK(ncclParamBind(&h, keys[i]) == ncclSuccess);
  }
  CHECK(seen.count("NCCL_BUFFSIZE") == 1);
  CHECK(seen.count("GYRE_TIMEOUT") == 1);
}

TEST_CASE("bad keys, handles and pointers are refused by name") {
  ncclParamHandle_t h = nullptr;
  CHECK(ncclParamBind(&h, "NCCL_BUFSIZE") == ncclInvalidArgument);
  CHECK(lastError().find("did you mean NCCL_BUFFSIZE") != std::string::npos);
  CHECK(h == nullptr);
  CHECK(ncclParamBind(&h, nullptr) == ncclInvalidArgument);
  CHECK(ncclParamBind(nullptr, "NCCL_ALGO") == ncclInvalidArgument);
  int x = 0;
  int64_t v = 0;
  CHECK(ncclParamGetI64(reinterpret_cast<ncclParamHandle_t>(&x), &v) == ncclInvalidArgument);
  CHECK(lastError().find("ncclParamBind") != std::string::npos);
  CHECK(ncclParamGetI64(bind("NCCL_BUFFSIZE"), nullptr) == ncclInvalidArgument);
  const char* s = nullptr;
  int len = 0;
  CHECK(ncclParamGetParameter("NO_SUCH_SETTING", &s, &len) == ncclInvalidArgument);
  CHECK(ncclParamGetParameter("NCCL_ALGO", nullptr, &len) == ncclInvalidArgument);
  CHECK(ncclParamGetAllParameterKeys(nullptr, &len) == ncclInvalidArgument);
  CHECK(ncclParamGet(bind("NCCL_ALGO"), nullptr, 8, &len) == ncclInvalidArgument);
}

TEST_CASE("ncclParamDumpAll logs every setting with its value and source") {
  char path[] = "/tmp/gyre-param-dump-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  ncclResetDebugInit();
  ncclParamDumpAll();
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_FILE");
  ncclResetDebugInit();
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  remove(path);
  std::string log = text.str();
  CHECK(log.find("NCCL_BUFFSIZE=2M (env") != std::string::npos);
  CHECK(log.find("NCCL_ALGO=Ring (env") != std::string::npos);
  CHECK(log.find("GYRE_TIMEOUT=300 (default)") != std::string::npos);
}
