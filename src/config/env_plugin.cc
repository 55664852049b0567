#include "src/config/env_plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>

#include "include/gyre.h"

namespace gyre::env {
namespace {

// NCCL's ncclEnv_v1_t and ncclEnv_v2_t (member order and types); v2 adds the
// logger to init().
typedef void (*EnvLogger)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

struct EnvV1 {
  const char* name;
  ncclResult_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
};

struct EnvV2 {
  const char* name;
  ncclResult_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, EnvLogger log);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
};

constexpr const char* kSymbols[] = {"ncclEnvPlugin_v2", "ncclEnvPlugin_v1"};

EnvPlugin* gPlugin = nullptr;
ncclResult_t (*gFinalize)(void) = nullptr;

// The plugin logs while gyre's logger cannot yet (it reads settings through
// this plugin): its WARN lines (NCCL level 2 and 4) are kept for later.
void keepWarnings(int level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != 2 && level != 4) return;
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (gPlugin) gPlugin->warnings.push_back(std::string("env plugin: ") + text);
}

void finalizeAtExit() {
  if (gFinalize) (void)gFinalize();
}

// The files NCCL_ENV_PLUGIN's value may mean, in the order NCCL tries them.
std::vector<std::string> candidates(const char* spec) {
  if (!spec || !*spec) return {"libnccl-env.so"};
  const std::string s = spec;
  const bool isLibFile = s.rfind("lib", 0) == 0 && s.size() > 3 && s.compare(s.size() - 3, 3, ".so") == 0;
  if (s.find('/') != std::string::npos || isLibFile) return {s};
  return {s, "libnccl-env-" + s + ".so"};
}

void open(EnvPlugin* p) {
  const char* spec = getenv("NCCL_ENV_PLUGIN");
  if (spec && strcasecmp(spec, "none") == 0) return;
  const bool named = spec && *spec;
  void* lib = nullptr;
  std::string file, errors;
  for (const std::string& c : candidates(spec)) {
    lib = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      file = c;
      break;
    }
    const char* e = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(e ? e : c.c_str());
  }
  if (!lib) {
    if (named)
      p->warnings.push_back("NCCL_ENV_PLUGIN=" + std::string(spec) + ": cannot load the env plugin (" + errors +
                            "); settings come from the environment");
    return;
  }
  for (const char* symbol : kSymbols) {
    const void* table = dlsym(lib, symbol);
    if (!table) continue;
    const int version = symbol[strlen(symbol) - 1] - '0';
    const char* name = nullptr;
    ncclResult_t r = ncclInternalError;
    const char* (*getEnv)(const char*) = nullptr;
    if (version == 2) {
      auto* t = static_cast<const EnvV2*>(table);
      name = t->name;
      getEnv = t->getEnv;
      gFinalize = t->finalize;
      if (t->init && getEnv) r = t->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX, keepWarnings);
    } else {
      auto* t = static_cast<const EnvV1*>(table);
      name = t->name;
      getEnv = t->getEnv;
      gFinalize = t->finalize;
      if (t->init && getEnv) r = t->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX);
    }
    const std::string what = "env plugin " + std::string(name ? name : "unnamed") + " (" + file + ", " + symbol + ")";
    if (r != ncclSuccess) {
      gFinalize = nullptr;
      p->warnings.push_back(what + (getEnv ? " failed to initialize" : " has no init or getEnv") +
                            "; settings come from the environment");
      dlclose(lib);
      return;
    }
    p->getEnv = getEnv;
    p->origin = what;
    p->notes.push_back("settings come from " + what);
    atexit(finalizeAtExit);
    return;  // the library stays loaded: values it returned are read until exit
  }
  p->warnings.push_back(file + " exports neither ncclEnvPlugin_v2 nor ncclEnvPlugin_v1; settings come from the "
                        "environment");
  dlclose(lib);
}

}  // namespace

const EnvPlugin& envPlugin() {
  static std::once_flag once;
  std::call_once(once, [] {
    gPlugin = new EnvPlugin();
    open(gPlugin);
  });
  return *gPlugin;
}

std::vector<std::string> envPluginSymbols() { return {std::begin(kSymbols), std::end(kSymbols)}; }

}  // namespace gyre::env
