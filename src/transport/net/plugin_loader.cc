#include "src/transport/net/plugin_loader.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <vector>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/net/net_adapters.h"

namespace gyre {
namespace {

// The symbols NCCL looks a net plugin's table up by (NCCL_NET_PLUGIN_SYMBOL
// of each version), newest first: the first one a plugin exports is used.
constexpr const char* kNetSymbols[] = {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10",
                                       "ncclNetPlugin_v9", "ncclNetPlugin_v8"};
// Versions named in errors and logs (what a plugin exports), oldest first.
constexpr int kOldestNamed = 2, kNewestNamed = 16;

std::mutex gWarnMu;
std::string gLastWarn;
std::string gLoadedFile;  // guarded by gWarnMu

// The logger handed to plugins: their lines join gyre's log (NET subsystem)
// at the level they were written at (WARN always, TRACE at NCCL_DEBUG=TRACE),
// and the last warning is kept for the error a failed call reports.
void pluginLogger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags;
  const bool warn = level == kNetLogWarn || level == kNetLogAbort;
  const LogLevel ours = warn                    ? LogLevel::Warn
                        : level == kNetLogInfo  ? LogLevel::Info
                        : level >= kNetLogTrace ? LogLevel::Trace
                                                : LogLevel::Version;
  if (!warn && logLevel() < ours) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof(text), fmt, ap);
  va_end(ap);
  if (warn) {
    {
      std::lock_guard<std::mutex> lock(gWarnMu);
      gLastWarn = text;
    }
    logLine(LogLevel::Warn, "NET", "net plugin: %s (%s:%d)", text, file ? file : "?", line);
  } else {
    logLine(ours, "NET", "net plugin: %s", text);
  }
}

// The v8 view of the newest supported table `lib` exports; *version names it.
const gyreNet_v8_t* newestTable(void* lib, const char** version) {
  for (const char* v : kNetSymbols) {
    void* table = dlsym(lib, v);
    if (!table) continue;
    *version = v;
    const int n = atoi(v + strlen("ncclNetPlugin_v"));
    if (n == 12) return adaptNetV12(static_cast<const gyreNet_v12_t*>(table));
    if (n == 11) return adaptNetV11(static_cast<const gyreNet_v11_t*>(table));
    if (n == 10) return adaptNetV10(static_cast<const gyreNet_v10_t*>(table));
    if (n == 9) return adaptNetV9(static_cast<const gyreNet_v9_t*>(table));
    return static_cast<const gyreNet_v8_t*>(table);
  }
  return nullptr;
}

// The `prefix`_vN symbols `lib` exports, for logs and errors ("" if none).
std::string exportedVersions(void* lib, const char* prefix) {
  std::string found;
  for (int v = kOldestNamed; v <= kNewestNamed; ++v) {
    const std::string symbol = prefix + std::string("_v") + std::to_string(v);
    if (dlsym(lib, symbol.c_str())) found += (found.empty() ? "" : ", ") + symbol;
  }
  return found;
}

// The files NCCL_NET_PLUGIN's value may mean, in the order NCCL tries them:
// the value as given, then libnccl-net-NAME.so unless it is a path or
// already a lib*.so file name.
std::vector<std::string> candidates(const std::string& spec) {
  const bool isLibFile = spec.rfind("lib", 0) == 0 && spec.size() > 3 && spec.compare(spec.size() - 3, 3, ".so") == 0;
  if (spec.find('/') != std::string::npos || isLibFile) return {spec};
  return {spec, "libnccl-net-" + spec + ".so"};
}

}  // namespace

std::string loadedNetPluginFile() {
  std::lock_guard<std::mutex> lock(gWarnMu);
  return gLoadedFile;
}

std::vector<std::string> netPluginSymbols() { return {std::begin(kNetSymbols), std::end(kNetSymbols)}; }

std::string lastPluginWarning(const std::string& name) {
  std::lock_guard<std::mutex> lock(gWarnMu);
  if (gLastWarn.empty()) return "plugin " + name + " logged no reason";
  return gLastWarn;
}

bool loadDefaultNetPlugin(Network* out) {
  void* lib = dlopen("libnccl-net.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    GYRE_INFO("NET", "no default net plugin (%s)", dlerror());
    return false;
  }
  // A default plugin that does not work is not an error, as in NCCL: the
  // built-in networks carry the traffic and INFO says why.
  ncclResult_t r;
  {
    QuietFailures quiet(true);
    r = loadNetPlugin("libnccl-net.so", out);
  }
  if (r == ncclSuccess) return true;
  GYRE_INFO("NET", "default net plugin libnccl-net.so not used: %s", lastErrorText());
  clearThreadError();
  return false;
}

namespace {

// The functions gyre calls that `api` leaves null, named as in NCCL's tables ("" if none).
std::string nullRequiredFunctions(const gyreNet_v8_t& api) {
  const std::pair<bool, const char*> required[] = {
      {api.init != nullptr, "init"},           {api.devices != nullptr, "devices"},
      {api.listen != nullptr, "listen"},
      {api.connect != nullptr, "connect"},     {api.accept != nullptr, "accept"},
      {api.regMr != nullptr, "regMr"},         {api.deregMr != nullptr, "deregMr"},
      {api.isend != nullptr, "isend"},         {api.irecv != nullptr, "irecv"},
      {api.test != nullptr, "test"},           {api.closeSend != nullptr, "closeSend"},
      {api.closeRecv != nullptr, "closeRecv"}, {api.closeListen != nullptr, "closeListen"}};
  std::string missing;
  for (const auto& [present, name] : required)
    if (!present) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return missing;
}

}  // namespace

ncclResult_t loadNetPlugin(const std::string& spec, Network* out) {
  // The handle is kept for the life of the process, as plugins expect.
  void* lib = nullptr;
  std::string file, tried;
  for (const std::string& candidate : candidates(spec)) {
    lib = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      file = candidate;
      break;
    }
    tried += (tried.empty() ? "" : "; ") + candidate + ": " + dlerror();
  }
  if (!lib)
    return fail(ncclInvalidArgument, "NCCL_NET_PLUGIN=%s: cannot load the plugin (tried %s)", spec.c_str(),
                tried.c_str());
  const std::string exported = exportedVersions(lib, "ncclNetPlugin");
  const char* version = nullptr;
  const gyreNet_v8_t* api = newestTable(lib, &version);
  if (!api) {
    std::string supported;
    for (const char* v : kNetSymbols) supported += (supported.empty() ? "" : ", ") + std::string(v);
    return fail(ncclInvalidArgument,
                "NCCL_NET_PLUGIN=%s: %s exports no ncclNet version gyre supports (looked for %s; it exports %s)",
                spec.c_str(), file.c_str(), supported.c_str(),
                exported.empty() ? "no ncclNetPlugin_vN" : exported.c_str());
  }
  const std::string missing = nullRequiredFunctions(*api);
  if (!missing.empty())
    return fail(ncclInvalidArgument, "NCCL_NET_PLUGIN=%s: %s's %s leaves %s null; gyre needs every one of them",
                spec.c_str(), file.c_str(), version, missing.c_str());
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
  out->maxMessageBytes = adaptedMaxP2pBytes(0);
  {
    std::lock_guard<std::mutex> lock(gWarnMu);
    gLoadedFile = file;
  }
  GYRE_INFO("NET", "loaded net plugin %s from %s (%s, %d devices; exports %s)", name.c_str(), file.c_str(), version,
            ndev, exported.c_str());
  // gyre has no CollNet algorithms: a collective-network table is not used.
  const std::string collNet = exportedVersions(lib, "ncclCollNetPlugin");
  if (!collNet.empty())
    GYRE_INFO("NET", "net plugin %s also exports %s; gyre has no CollNet algorithms and does not use it",
              name.c_str(), collNet.c_str());
  return ncclSuccess;
}

}  // namespace gyre
