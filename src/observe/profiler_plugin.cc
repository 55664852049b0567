#include "src/observe/profiler_plugin.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "src/config/env.h"
#include "src/debug/log.h"

namespace gyre::profiler {
namespace {

// NCCL's ncclDebugLogLevel: 1 VERSION, 2 WARN, 3 INFO, 4 ABORT, 5 TRACE.
void pluginLogger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  LogLevel ours = level == 2 ? LogLevel::Warn : level == 3 ? LogLevel::Info : level >= 5 ? LogLevel::Trace
                                                                                           : LogLevel::Version;
  if (level == 4) ours = LogLevel::Warn;
  if (logLevel() < ours) return;
  va_list ap;
  va_start(ap, fmt);
  logLineV(ours, "PROFILE", fmt, ap);
  va_end(ap);
}

struct Loaded {
  const PluginV5* table = nullptr;
  std::string file;     // as dlopen'ed
  int version = 0;
};

// The symbols NCCL looks a profiler's table up by, of the versions gyre
// drives, newest first.
constexpr const char* kSymbols[] = {"ncclProfiler_v6", "ncclProfiler_v5"};

// The file names NCCL_PROFILER_PLUGIN's value may mean, in the order NCCL
// tries them: the value as given, then libnccl-profiler-NAME.so unless it
// is a path or already a lib*.so file name.
std::vector<std::string> candidates(const std::string& spec) {
  const bool isLibFile = spec.rfind("lib", 0) == 0 && spec.size() > 3 && spec.compare(spec.size() - 3, 3, ".so") == 0;
  if (spec.find('/') != std::string::npos || isLibFile) return {spec};
  return {spec, "libnccl-profiler-" + spec + ".so"};
}

Loaded load() {
  Loaded out;
  const std::string spec = env::getString("NCCL_PROFILER_PLUGIN");
  if (spec == "none") return out;
  const bool named = !spec.empty();
  void* lib = nullptr;
  std::string dlerrors;
  for (const std::string& file : named ? candidates(spec) : std::vector<std::string>{"libnccl-profiler.so"}) {
    lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      out.file = file;
      break;
    }
    const char* e = dlerror();
    dlerrors += std::string(dlerrors.empty() ? "" : "; ") + (e ? e : file);
  }
  if (!lib) {
    if (named)
      GYRE_WARN("NCCL_PROFILER_PLUGIN=%s: the profiler plugin could not be loaded (%s); running without it",
                spec.c_str(), dlerrors.c_str());
    else
      GYRE_INFO("INIT", "no profiler plugin (libnccl-profiler.so not found)");
    return out;
  }
  for (const char* symbol : kSymbols) {
    if (auto* t = static_cast<const PluginV5*>(dlsym(lib, symbol))) {
      out.table = t;
      out.version = atoi(symbol + strlen("ncclProfiler_v"));
      break;
    }
  }
  if (!out.table || !out.table->init || !out.table->startEvent || !out.table->stopEvent || !out.table->finalize) {
    GYRE_WARN("profiler plugin %s exports %s; gyre drives ncclProfiler_v6 and ncclProfiler_v5: running without it",
              out.file.c_str(), out.table ? "an incomplete function table" : "neither ncclProfiler_v6 nor _v5");
    dlclose(lib);
    return Loaded{};
  }
  GYRE_INFO("INIT", "profiler plugin %s (%s, ncclProfiler_v%d)", out.file.c_str(),
            out.table->name ? out.table->name : "unnamed", out.version);
  return out;  // stays loaded for the process's life: events may outlive a communicator's teardown order
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

std::vector<std::string> pluginSymbols() { return {std::begin(kSymbols), std::end(kSymbols)}; }

const PluginV5* plugin() { return loaded().table; }

bool initForComm(uint64_t commId, int nNodes, int nranks, int rank, void** context, int* mask) {
  *context = nullptr;
  *mask = 0;
  const PluginV5* p = plugin();
  if (!p) return false;
  void* ctx = nullptr;
  int m = 0;
  ncclResult_t r = p->init(&ctx, commId, &m, nullptr, nNodes, nranks, rank, pluginLogger);
  if (r != ncclSuccess) {
    GYRE_WARN("profiler plugin %s: init for rank %d of communicator %016llx returned %d; this communicator runs "
              "without it", loaded().file.c_str(), rank, static_cast<unsigned long long>(commId), int(r));
    return false;
  }
  *context = ctx;
  *mask = m;
  return true;
}

void finalizeForComm(void* context) { plugin()->finalize(context); }

void* start(void* context, EventDescr* descr) {
  void* handle = nullptr;
  if (plugin()->startEvent(context, &handle, descr) != ncclSuccess) return nullptr;
  return handle;
}

void stop(void* handle) {
  if (handle) plugin()->stopEvent(handle);
}

void recordState(void* handle, EventState state, EventStateArgs* args) {
  if (handle && plugin()->recordEventState) plugin()->recordEventState(handle, state, args);
}

const char* datatypeName(ncclDataType_t type) {
  static const char* names[] = {"ncclInt8",    "ncclUint8",   "ncclInt32",    "ncclUint32",
                                "ncclInt64",   "ncclUint64",  "ncclFloat16",  "ncclFloat32",
                                "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return type >= 0 && type < ncclNumTypes ? names[type] : "unknown";
}

}  // namespace gyre::profiler
