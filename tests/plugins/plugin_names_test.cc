// The symbols gyre looks plugins up by, and those its test plugins export,
// against NCCL's own: the names below are taken from NCCL 2.30's public
// plugin headers (NCCL_NET_PLUGIN_SYMBOL and the per-version loaders:
// ncclNetPlugin_vN, ncclTunerPlugin_vN, ncclProfiler_vN, ncclEnvPlugin_vN),
// newest first, for the versions gyre supports. A loader looking for another
// name (gyre once looked net plugins up as ncclNet_vN, which no real plugin
// exports) or a test plugin exporting one fails here.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "src/config/env_plugin.h"
#include "src/observe/profiler_plugin.h"
#include "src/plan/tuner_plugin.h"
#include "src/transport/net/plugin_loader.h"

namespace {

const std::vector<std::string> kNcclNetSymbols = {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10",
                                                  "ncclNetPlugin_v9", "ncclNetPlugin_v8"};
const std::vector<std::string> kNcclTunerSymbols = {"ncclTunerPlugin_v6", "ncclTunerPlugin_v5", "ncclTunerPlugin_v4",
                                                    "ncclTunerPlugin_v3", "ncclTunerPlugin_v2"};
const std::vector<std::string> kNcclProfilerSymbols = {"ncclProfiler_v6", "ncclProfiler_v5"};
const std::vector<std::string> kNcclEnvSymbols = {"ncclEnvPlugin_v2", "ncclEnvPlugin_v1"};

void* openVar(const char* var) {
  const char* path = getenv(var);
  INFO(var);
  REQUIRE(path != nullptr);
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  INFO(dlerror());
  REQUIRE(lib != nullptr);
  return lib;
}

bool exports(void* lib, const std::string& symbol) { return dlsym(lib, symbol.c_str()) != nullptr; }

}  // namespace

TEST_CASE("gyre looks every plugin kind up by NCCL's symbol names, newest version first", "[names]") {
  CHECK(gyre::netPluginSymbols() == kNcclNetSymbols);
  CHECK(gyre::tunerPluginSymbols() == kNcclTunerSymbols);
  CHECK(gyre::profiler::pluginSymbols() == kNcclProfilerSymbols);
  CHECK(gyre::env::envPluginSymbols() == kNcclEnvSymbols);
}

TEST_CASE("the test net plugin exports ncclNetPlugin_v8 to _v12 as real plugins do, and no ncclNet_vN", "[names]") {
  void* lib = openVar("NAMES_NET_PLUGIN");
  for (const std::string& symbol : kNcclNetSymbols) {
    INFO(symbol);
    CHECK(exports(lib, symbol));
  }
  for (int v = 2; v <= 16; ++v) {
    INFO("ncclNet_v" << v);
    CHECK_FALSE(exports(lib, "ncclNet_v" + std::to_string(v)));
  }
}

TEST_CASE("the test tuner, profiler and env plugins export NCCL's symbol names", "[names]") {
  for (int v = 2; v <= 6; ++v) {
    void* lib = openVar(("NAMES_TUNER_V" + std::to_string(v)).c_str());
    INFO("tuner v" << v);
    CHECK(exports(lib, "ncclTunerPlugin_v" + std::to_string(v)));
  }
  CHECK(exports(openVar("NAMES_PROFILER"), "ncclProfiler_v5"));
  CHECK(exports(openVar("NAMES_ENV_V2"), "ncclEnvPlugin_v2"));
  CHECK(exports(openVar("NAMES_ENV_V1"), "ncclEnvPlugin_v1"));
}
