#include "src/transport/net/plugin_loader.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/net/net_adapters.h"

namespace gyre {
namespace {

// The tables gyre reads, newest first: the first one a plugin exports is used.
constexpr const char* kSupported[] = {"ncclNet_v10", "ncclNet_v9", "ncclNet_v8"};
// Versions named in errors and logs (what a plugin exports), oldest first.
constexpr int kOldestNamed = 2, kNewestNamed = 16;

std::mutex gWarnMu;
std::string gLastWarn;
std::string gLoadedFile;  // guarded by gWarnMu

// The logger handed to plugins: their lines join gyre's log (NET subsystem),
// and the last warning is kept for the error a failed call reports.
void pluginLogger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (level == kNetLogWarn || level == kNetLogAbort) {
    {
      std::lock_guard<std::mutex> lock(gWarnMu);
      gLastWarn = text;
    }
    logLine(LogLevel::Warn, "NET", "net plugin: %s (%s:%d)", text, file ? file : "?", line);
  } else if (level == kNetLogInfo || level == kNetLogVersion) {
    GYRE_INFO("NET", "net plugin: %s", text);
  }
}

// The v8 view of the newest supported table `lib` exports; *version names it.
const gyreNet_v8_t* newestTable(void* lib, const char** version) {
  for (const char* v : kSupported) {
    void* table = dlsym(lib, v);
    if (!table) continue;
    *version = v;
    if (strcmp(v, "ncclNet_v10") == 0) return adaptNetV10(static_cast<const gyreNet_v10_t*>(table));
    if (strcmp(v, "ncclNet_v9") == 0) return adaptNetV9(static_cast<const gyreNet_v9_t*>(table));
    return static_cast<const gyreNet_v8_t*>(table);
  }
  return nullptr;
}

std::string fileFor(const std::string& spec) {
  if (spec.find('/') != std::string::npos) return spec;
  if (spec.size() > 3 && spec.compare(spec.size() - 3, 3, ".so") == 0) return spec;
  return "libnccl-net-" + spec + ".so";
}

}  // namespace

std::string loadedNetPluginFile() {
  std::lock_guard<std::mutex> lock(gWarnMu);
  return gLoadedFile;
}

std::string lastPluginWarning(const std::string& name) {
  std::lock_guard<std::mutex> lock(gWarnMu);
  if (gLastWarn.empty()) return "plugin " + name + " logged no reason";
  return gLastWarn;
}

ncclResult_t loadNetPlugin(const std::string& spec, Network* out) {
  const std::string file = fileFor(spec);
  // The handle is kept for the life of the process, as plugins expect.
  void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return fail(ncclInvalidArgument, "NCCL_NET_PLUGIN=%s: cannot load %s: %s", spec.c_str(), file.c_str(),
                dlerror());
  std::string exported;
  for (int v = kOldestNamed; v <= kNewestNamed; ++v) {
    const std::string symbol = "ncclNet_v" + std::to_string(v);
    if (dlsym(lib, symbol.c_str())) exported += (exported.empty() ? "" : ", ") + symbol;
  }
  const char* version = nullptr;
  const gyreNet_v8_t* api = newestTable(lib, &version);
  if (!api) {
    std::string supported;
    for (const char* v : kSupported) supported += (supported.empty() ? "" : ", ") + std::string(v);
    return fail(ncclInvalidArgument,
                "NCCL_NET_PLUGIN=%s: %s exports no ncclNet version gyre supports (looked for %s; it exports %s)",
                spec.c_str(), file.c_str(), supported.c_str(), exported.empty() ? "no ncclNet_vN" : exported.c_str());
  }
  if (!api->init || !api->devices || !api->listen || !api->connect || !api->accept || !api->isend || !api->irecv ||
      !api->test || !api->regMr || !api->deregMr || !api->closeSend || !api->closeRecv || !api->closeListen)
    return fail(ncclInvalidArgument, "NCCL_NET_PLUGIN=%s: %s's %s leaves a required function null", spec.c_str(),
                file.c_str(), version);
  const std::string name = api->name ? api->name : spec;
  if (api->init(pluginLogger) != ncclSuccess)
    return fail(ncclSystemError, "NCCL_NET_PLUGIN=%s: network %s (%s) failed to initialize: %s", spec.c_str(),
                name.c_str(), file.c_str(), lastPluginWarning(name).c_str());
  int ndev = 0;
  if (api->devices(&ndev) != ncclSuccess || ndev <= 0)
    return fail(ncclSystemError, "NCCL_NET_PLUGIN=%s: network %s (%s) reports no devices", spec.c_str(),
                name.c_str(), file.c_str());
  out->name = name;
  out->api = api;
  out->devices = ndev;
  out->external = true;
  {
    std::lock_guard<std::mutex> lock(gWarnMu);
    gLoadedFile = file;
  }
  GYRE_INFO("NET", "loaded net plugin %s from %s (%s, %d devices; exports %s)", name.c_str(), file.c_str(), version,
            ndev, exported.c_str());
  return ncclSuccess;
}

}  // namespace gyre
