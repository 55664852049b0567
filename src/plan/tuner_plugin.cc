#include "src/plan/tuner_plugin.h"

#include <dlfcn.h>
#include <strings.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "src/config/env.h"
#include "src/debug/log.h"
#include "src/transport/net/plugin_loader.h"

namespace gyre {
namespace {

using namespace tuner;

// NCCL's ncclDebugLogLevel: 1 VERSION, 2 WARN, 3 INFO, 4 ABORT, 5 TRACE.
void pluginLogger(int level, unsigned long, const char*, int, const char* fmt, ...) {
  LogLevel ours = level == 2 || level == 4 ? LogLevel::Warn
                  : level == 3             ? LogLevel::Info
                  : level >= 5             ? LogLevel::Trace
                                           : LogLevel::Version;
  if (logLevel() < ours) return;
  va_list ap;
  va_start(ap, fmt);
  logLineV(ours, "TUNING", fmt, ap);
  va_end(ap);
}

// The files NCCL_TUNER_PLUGIN's value may mean, in the order NCCL tries them:
// the value as given, then libnccl-tuner-NAME.so unless it is a path or
// already a lib*.so file name.
std::vector<std::string> candidates(const std::string& spec) {
  if (spec.empty()) return {"libnccl-tuner.so"};
  auto endsWith = [&](const char* tail) {
    size_t n = strlen(tail);
    return spec.size() >= n && spec.compare(spec.size() - n, n, tail) == 0;
  };
  if (spec.find('/') != std::string::npos || (spec.rfind("lib", 0) == 0 && endsWith(".so"))) return {spec};
  return {spec, "libnccl-tuner-" + spec + ".so"};
}

// The table of the newest version `lib` exports, or null; *version names it.
const void* newestTable(void* lib, int* version) {
  for (const std::string& symbol : tunerPluginSymbols())
    if (const void* t = dlsym(lib, symbol.c_str())) {
      *version = atoi(symbol.c_str() + strlen("ncclTunerPlugin_v"));
      return t;
    }
  return nullptr;
}

// The ncclTunerPlugin_vN symbols outside the versions gyre drives that `lib` exports.
std::string otherVersions(void* lib) {
  std::string found;
  for (int v = 1; v <= 16; ++v)
    if ((v < kOldestVersion || v > kNewestVersion) && dlsym(lib, ("ncclTunerPlugin_v" + std::to_string(v)).c_str()))
      found += (found.empty() ? "" : ", ") + ("ncclTunerPlugin_v" + std::to_string(v));
  return found;
}

// Whether the table's functions gyre calls are there (getChunkSize is optional).
bool complete(const void* table, int version) {
  switch (version) {
    case 2: { auto* t = static_cast<const TunerV2*>(table); return t->init && t->getCollInfo && t->destroy; }
    case 3: { auto* t = static_cast<const TunerV3*>(table); return t->init && t->getCollInfo && t->destroy; }
    case 4: { auto* t = static_cast<const TunerV4*>(table); return t->init && t->getCollInfo && t->destroy; }
    default: { auto* t = static_cast<const TunerV5*>(table); return t->init && t->getCollInfo && t->finalize; }
  }
}

// The library at `file`'s tuner, or null with `why` said. `asked`: a WARN
// for a library the user named (an INFO for the default or the net plugin's).
std::unique_ptr<TunerLibrary> useLibrary(void* lib, const std::string& file, const std::string& what, bool asked) {
  auto out = std::make_unique<TunerLibrary>();
  out->file = file;
  out->table = newestTable(lib, &out->version);
  std::string why;
  if (!out->table) {
    std::string others = otherVersions(lib);
    why = others.empty() ? "exports no ncclTunerPlugin_vN symbol"
                         : "exports " + others + ", a tuner interface version gyre does not drive";
  } else if (!complete(out->table, out->version)) {
    why = "leaves a required function of ncclTunerPlugin_v" + std::to_string(out->version) + " null";
  }
  if (!why.empty()) {
    if (asked)
      GYRE_WARN("%s: tuner plugin %s %s (gyre drives ncclTunerPlugin_v%d down to _v%d); planning without it",
                what.c_str(), file.c_str(), why.c_str(), kNewestVersion, kOldestVersion);
    else
      GYRE_INFO("TUNING", "%s: %s %s; no tuner plugin", what.c_str(), file.c_str(), why.c_str());
    dlclose(lib);
    return nullptr;
  }
  const char* name = *static_cast<const char* const*>(out->table);  // every version starts with its name
  out->name = name ? name : "unnamed";
  GYRE_INFO("TUNING", "tuner plugin %s loaded from %s (ncclTunerPlugin_v%d; %s)", out->name.c_str(), file.c_str(),
            out->version, what.c_str());
  return out;
}

}  // namespace

std::vector<std::string> tunerPluginSymbols() {
  std::vector<std::string> symbols;
  for (int v = kNewestVersion; v >= kOldestVersion; --v) symbols.push_back("ncclTunerPlugin_v" + std::to_string(v));
  return symbols;
}

std::unique_ptr<TunerLibrary> loadTunerLibrary(const std::string& spec) {
  if (strcasecmp(spec.c_str(), "none") == 0) {
    GYRE_INFO("TUNING", "NCCL_TUNER_PLUGIN=none: no tuner plugin");
    return nullptr;
  }
  const bool asked = !spec.empty();
  const std::string what = asked ? "NCCL_TUNER_PLUGIN=" + spec : "the default tuner plugin";
  std::string dlerrors;
  for (const std::string& file : candidates(spec)) {
    if (void* lib = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) return useLibrary(lib, file, what, asked);
    const char* e = dlerror();
    dlerrors += std::string(dlerrors.empty() ? "" : "; ") + (e ? e : file);
  }
  // As NCCL: a net plugin's library may carry the tuner too.
  const std::string net = loadedNetPluginFile();
  if (!net.empty())
    if (void* lib = dlopen(net.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      int version = 0;
      if (newestTable(lib, &version))
        return useLibrary(lib, net, what + " not found (" + dlerrors + "): the net plugin's library", asked);
      dlclose(lib);
    }
  if (asked)
    GYRE_WARN("NCCL_TUNER_PLUGIN=%s: the tuner plugin could not be loaded (%s%s); planning without it",
              spec.c_str(), dlerrors.c_str(), net.empty() ? "" : "; the net plugin's library exports no tuner");
  else
    GYRE_INFO("TUNING", "no tuner plugin (libnccl-tuner.so not found)");
  return nullptr;
}

const TunerLibrary* processTunerLibrary() {
  static const std::unique_ptr<TunerLibrary> lib = loadTunerLibrary(env::getString("NCCL_TUNER_PLUGIN"));
  return lib.get();
}

TunerSession::TunerSession(const TunerLibrary& lib, const Facts& facts, void* context)
    : lib_(lib), facts_(facts), context_(context) {
  label_ = lib.name + " (" + lib.file + ", v" + std::to_string(lib.version) + ")";
}

std::unique_ptr<TunerSession> TunerSession::open(const TunerLibrary& lib, const Facts& f) {
  void* context = nullptr;
  ncclResult_t r = ncclInternalError;
  bool constantsChanged = false;
  if (lib.version <= 4) {
    // v2, v3 and v4 share init's signature.
    r = static_cast<const TunerV2*>(lib.table)->init(f.nranks, f.nnodes, pluginLogger, &context);
  } else {
    // NVLink domains: gyre counts a host as one. NCCL's tuning constants are
    // passed zeroed: gyre's model does not read them (its costs reach the
    // plugin in the cost table), so what a plugin writes there changes nothing.
    NvlDomainInfoV5 nvl{f.nnodes, f.minRanksPerNode, f.maxRanksPerNode};
    ConstantsV5 constants{};
    r = static_cast<const TunerV5*>(lib.table)->init(&context, f.commId, f.nranks, f.nnodes, pluginLogger, &nvl,
                                                      &constants);
    const ConstantsV5 zero{};
    constantsChanged = memcmp(&constants, &zero, sizeof zero) != 0;
  }
  if (r != ncclSuccess) {
    GYRE_WARN("tuner plugin %s (%s): init for rank %d of communicator %016llx (%d ranks, %d hosts) returned %d; "
              "this communicator plans without it",
              lib.name.c_str(), lib.file.c_str(), f.rank, static_cast<unsigned long long>(f.commId), f.nranks,
              f.nnodes, int(r));
    return nullptr;
  }
  std::unique_ptr<TunerSession> s(new TunerSession(lib, f, context));
  GYRE_INFO("TUNING", "tuner plugin %s: init for communicator %016llx (%d ranks, %d hosts)", s->label_.c_str(),
            static_cast<unsigned long long>(f.commId), f.nranks, f.nnodes);
  if (constantsChanged)
    s->noteOnce("constants", "tuner plugin " + s->label_ +
                                 " changed NCCL's tuning constants at init: gyre's cost model does not use them, "
                                 "so they have no effect (its estimates reach the plugin in the cost table)");
  return s;
}

TunerSession::~TunerSession() {
  ncclResult_t r = lib_.version <= 4 ? static_cast<const TunerV2*>(lib_.table)->destroy(context_)
                                     : static_cast<const TunerV5*>(lib_.table)->finalize(context_);
  GYRE_INFO("TUNING", "tuner plugin %s: %s for communicator %016llx returned %d", label_.c_str(),
            lib_.version <= 4 ? "destroy" : "finalize", static_cast<unsigned long long>(facts_.commId), int(r));
}

bool TunerSession::collInfo(Func func, size_t bytes, int numPipeOps, CostCells& table, int* nChannels) const {
  *nChannels = 0;
  float** cells = reinterpret_cast<float**>(&table[0][0]);  // NCCL's cast of its 2-D array
  ncclResult_t r = ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (lib_.version) {
      case 2: {
        // v2 names an algorithm and protocol; as NCCL does, that entry then
        // costs 0 (if it is in the table at all). gyre has no CollNet or NVLS.
        int algo = kUndef, proto = kUndef;
        r = static_cast<const TunerV2*>(lib_.table)->getCollInfo(context_, func, bytes, 0, 0, numPipeOps, &algo,
                                                                 &proto, nChannels);
        const bool inTable = algo >= 0 && algo < kNumAlgorithms && proto >= 0 && proto < kNumProtocols;
        if (r == ncclSuccess && inTable && table[algo][proto] != kIgnore) table[algo][proto] = 0.0f;
        if (r == ncclSuccess && !inTable && (algo != kUndef || proto != kUndef))
          noteOnce("v2-index", "tuner plugin " + label_ + " names algorithm " + std::to_string(algo) + ", protocol " +
                                   std::to_string(proto) + ", outside NCCL's table: ignored");
        break;
      }
      case 3:
        r = static_cast<const TunerV3*>(lib_.table)->getCollInfo(context_, func, bytes, numPipeOps, cells,
                                                                 kNumAlgorithms, kNumProtocols, nChannels);
        break;
      case 4:
        r = static_cast<const TunerV4*>(lib_.table)->getCollInfo(context_, func, bytes, numPipeOps, cells,
                                                                 kNumAlgorithms, kNumProtocols, 0, nChannels);
        break;
      default:
        r = static_cast<const TunerV5*>(lib_.table)->getCollInfo(context_, func, bytes, numPipeOps, cells,
                                                                 kNumAlgorithms, kNumProtocols, 0, nChannels);
    }
  }
  if (r != ncclSuccess) {
    noteOnce("getCollInfo-failed", "tuner plugin " + label_ + ": getCollInfo returned " + std::to_string(int(r)) +
                                       "; such calls are planned without it");
    *nChannels = 0;
    return false;
  }
  return true;
}

bool TunerSession::chunkSize(Func func, size_t bytes, int algo, int proto, int nChannels, size_t* chunk) const {
  if (lib_.version < 6) return false;
  auto* t = static_cast<const TunerV6*>(lib_.table);
  if (!t->getChunkSize) return false;
  ncclResult_t r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    r = t->getChunkSize(context_, func, bytes, algo, proto, nChannels, chunk);
  }
  if (r != ncclSuccess)
    noteOnce("getChunkSize-failed", "tuner plugin " + label_ + ": getChunkSize returned " + std::to_string(int(r)) +
                                        "; gyre keeps its chunk size there");
  return r == ncclSuccess;
}

void TunerSession::noteOnce(const std::string& key, const std::string& text) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!noted_.insert(key).second) return;
  }
  GYRE_INFO("TUNING", "%s", text.c_str());
}

}  // namespace gyre
