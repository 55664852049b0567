// NCCL env plugins (src/config/env_plugin.h), one process per case
// (tests/plugins/meson.build sets NCCL_ENV_PLUGIN and runs one tag): with a
// plugin, every NCCL_* / GYRE_* read returns the plugin's value, not the
// environment's, and names the plugin as its origin (gyre-info too); with
// NCCL_ENV_PLUGIN=none, or a library that is no env plugin, the
// environment's. The environment of every case sets NCCL_BUFFSIZE=999999
// and GYRE_TIMEOUT=77; the test plugin answers 131072 and 42.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "src/config/env.h"

namespace {

using CallsFn = void (*)(int*, int*, int*, int*);

std::string pluginPath() {
  const char* p = getenv("NCCL_ENV_PLUGIN");
  return p ? p : "";
}

// What gyre-info prints for this environment.
std::string gyreInfoOutput() {
  const char* info = getenv("ENVTEST_GYRE_INFO");
  REQUIRE(info != nullptr);
  std::string out;
  FILE* f = popen((std::string(info) + " --ranks 2 2>&1").c_str(), "r");
  REQUIRE(f != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

void expectPluginValues(const char* pluginName, const char* symbol, bool logger) {
  const gyre::env::Setting buffsize = gyre::env::lookup("NCCL_BUFFSIZE");
  CHECK(buffsize.value == "131072");
  CHECK(gyre::env::originOf(buffsize).find(std::string("env plugin ") + pluginName) != std::string::npos);
  CHECK(gyre::env::originOf(buffsize).find(symbol) != std::string::npos);
  int64_t timeout = 0;
  REQUIRE(gyre::env::getInt("GYRE_TIMEOUT", &timeout) == ncclSuccess);
  CHECK(timeout == 42);
  // Names the plugin does not answer come from the environment through it.
  CHECK(gyre::env::getString("NCCL_SOCKET_IFNAME") == "lo");

  void* lib = dlopen(pluginPath().c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto calls = reinterpret_cast<CallsFn>(dlsym(lib, "envtest_calls"));
  REQUIRE(calls != nullptr);
  int initCalls = 0, version = 0, getEnvCalls = 0, hadLogger = 0;
  calls(&initCalls, &version, &getEnvCalls, &hadLogger);
  CHECK(initCalls == 1);
  CHECK(version == NCCL_MAJOR * 10000 + NCCL_MINOR * 100 + NCCL_PATCH);
  CHECK(getEnvCalls >= static_cast<int>(gyre::env::registry().size()));  // every declared setting was asked
  CHECK(hadLogger == (logger ? 1 : 0));

  const std::string info = gyreInfoOutput();
  INFO(info.substr(0, 3000));
  CHECK(info.find(std::string("env plugin ") + pluginName) != std::string::npos);
}

}  // namespace

TEST_CASE("with an ncclEnvPlugin_v2 plugin every NCCL_ and GYRE_ read returns its value and names it as the origin",
          "[v2]") {
  expectPluginValues("GyreTestEnv", "ncclEnvPlugin_v2", true);
}

TEST_CASE("with an ncclEnvPlugin_v1 plugin every NCCL_ and GYRE_ read returns its value and names it as the origin",
          "[v1]") {
  expectPluginValues("GyreTestEnvV1", "ncclEnvPlugin_v1", false);
}

TEST_CASE("NCCL_ENV_PLUGIN=none or a library that is no env plugin leaves the settings to the environment",
          "[none]") {
  CHECK(gyre::env::getString("NCCL_BUFFSIZE") == "999999");
  CHECK(gyre::env::originOf(gyre::env::lookup("NCCL_BUFFSIZE")) == "environment");
  int64_t timeout = 0;
  REQUIRE(gyre::env::getInt("GYRE_TIMEOUT", &timeout) == ncclSuccess);
  CHECK(timeout == 77);
}

namespace {

// Runs the settings check that logs unknown names, and returns the log it wrote (NCCL_DEBUG_FILE).
std::string validationLog() {
  const char* file = getenv("NCCL_DEBUG_FILE");
  REQUIRE(file != nullptr);
  std::remove(file);
  (void)gyre::env::validateAll();
  std::string text;
  if (FILE* f = fopen(file, "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    fclose(f);
  }
  return text;
}

}  // namespace

TEST_CASE("with a tuner plugin asked for, NCCL settings gyre does not read are noted at INFO as the plugin's, not "
          "warned about as ignored",
          "[plugin-vars]") {
  const std::string log = validationLog();
  INFO(log);
  CHECK(log.find("does not implement and ignores") == std::string::npos);
  CHECK(log.find("left to the plugins it loads (NCCL_TUNER_PLUGIN=") != std::string::npos);
  CHECK(log.find("NCCL_TUNER_CONFIG_FILE") != std::string::npos);
}

TEST_CASE("with no plugin asked for, NCCL settings gyre does not read are warned about as ignored",
          "[no-plugin-vars]") {
  const std::string log = validationLog();
  INFO(log);
  // The WARN line lists every unknown setting in the environment (a CI
  // runner may set others): NCCL_TUNER_CONFIG_FILE must be among them.
  const size_t warn = log.find("does not implement and ignores: ");
  REQUIRE(warn != std::string::npos);
  const size_t lineEnd = log.find('\n', warn);
  CHECK(log.substr(warn, lineEnd == std::string::npos ? std::string::npos : lineEnd - warn)
            .find("NCCL_TUNER_CONFIG_FILE") != std::string::npos);
}
