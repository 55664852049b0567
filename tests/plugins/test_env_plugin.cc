// A small NCCL env plugin for the tests: it answers NCCL_BUFFSIZE and
// GYRE_TIMEOUT with its own values, whatever the environment says, and
// passes every other name through to the environment. Built twice
// (tests/plugins/meson.build): exporting ncclEnvPlugin_v2 (the default) or,
// with -DGYRETEST_ENV_V1, only ncclEnvPlugin_v1. envtest_calls() reports
// what gyre called.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "include/gyre.h"

namespace {

int gInitVersion = 0;  // the NCCL version init() was given, as major * 10000 + minor * 100 + patch
int gInitCalls = 0, gFinalizeCalls = 0, gGetEnvCalls = 0;
bool gHadLogger = false;

ncclResult_t initCommon(uint8_t major, uint8_t minor, uint8_t patch) {
  ++gInitCalls;
  gInitVersion = major * 10000 + minor * 100 + patch;
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t initV1(uint8_t major, uint8_t minor, uint8_t patch, const char*) {
  return initCommon(major, minor, patch);
}

using Logger = void (*)(int, unsigned long, const char*, int, const char*, ...);
[[maybe_unused]] ncclResult_t initV2(uint8_t major, uint8_t minor, uint8_t patch, const char*, Logger log) {
  gHadLogger = log != nullptr;
  if (log) log(3, 0, __FILE__, __LINE__, "envtest: initialized");
  return initCommon(major, minor, patch);
}

ncclResult_t finalize() {
  ++gFinalizeCalls;
  return ncclSuccess;
}

const char* getEnv(const char* name) {
  ++gGetEnvCalls;
  if (strcmp(name, "NCCL_BUFFSIZE") == 0) return "131072";
  if (strcmp(name, "GYRE_TIMEOUT") == 0) return "42";
  return getenv(name);
}

}  // namespace

#define ENVTEST_EXPORT extern "C" __attribute__((visibility("default")))

#ifdef GYRETEST_ENV_V1
struct EnvV1 {
  const char* name;
  ncclResult_t (*init)(uint8_t, uint8_t, uint8_t, const char*);
  ncclResult_t (*finalize)();
  const char* (*getEnv)(const char*);
};
ENVTEST_EXPORT const EnvV1 ncclEnvPlugin_v1 = {"GyreTestEnvV1", initV1, finalize, getEnv};
#else
struct EnvV2 {
  const char* name;
  ncclResult_t (*init)(uint8_t, uint8_t, uint8_t, const char*, Logger);
  ncclResult_t (*finalize)();
  const char* (*getEnv)(const char*);
};
ENVTEST_EXPORT const EnvV2 ncclEnvPlugin_v2 = {"GyreTestEnv", initV2, finalize, getEnv};
#endif

ENVTEST_EXPORT void envtest_calls(int* initCalls, int* initVersion, int* getEnvCalls, int* hadLogger) {
  *initCalls = gInitCalls;
  *initVersion = gInitVersion;
  *getEnvCalls = gGetEnvCalls;
  *hadLogger = gHadLogger;
}
