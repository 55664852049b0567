// Tuner plugins for the tests, one source built several times
// (tests/tuner/meson.build). GYRETEST_TUNER_VERSION picks the interface the
// library exports as ncclTunerPlugin_vN (0: none; 7: a version gyre does not
// drive, laid out as v6); GYRETEST_TUNER_MODE what getCollInfo does:
//
//   kTreeAbove  AllReduce from GYRETEST_TUNER_TREE_ABOVE bytes (default
//               65536): TREE/SIMPLE costs 0; below: RING/SIMPLE costs 0
//   kChannels   leaves the costs, asks for GYRETEST_TUNER_CHANNELS channels
//   kFailInit   init returns ncclInternalError
//   kGarbage    NaN, infinite and negative costs, NVLS/SIMPLE made cheapest,
//               nChannels 1000; getCollInfo fails for Broadcast
//   kSlow       sleeps GYRETEST_TUNER_SLEEP_MS (default 200) per call
//   kRingLL     RING/LL costs 0 at every size
//
// Every init, getCollInfo and destroy/finalize is appended to
// $GYRETEST_TUNER_LOG.<pid> as a line, so a rank can check what gyre passed.
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "src/plan/tuner_abi.h"

#define GYRETEST_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace gyre::tuner;

enum Mode { kTreeAbove, kChannels, kFailInit, kGarbage, kSlow, kRingLL };
constexpr Mode kMode = static_cast<Mode>(GYRETEST_TUNER_MODE);

long envLong(const char* name, long fallback) {
  const char* v = getenv(name);
  return v && *v ? strtol(v, nullptr, 10) : fallback;
}

void record(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void record(const char* fmt, ...) {
  const char* base = getenv("GYRETEST_TUNER_LOG");
  if (!base) return;
  std::string path = std::string(base) + "." + std::to_string(getpid());
  FILE* f = fopen(path.c_str(), "a");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fclose(f);
}

struct Context {
  size_t nranks;
  size_t nnodes;
};

ncclResult_t initCommon(size_t nRanks, size_t nNodes, Logger log, void** context) {
  record("init version=%d nranks=%zu nnodes=%zu", GYRETEST_TUNER_VERSION, nRanks, nNodes);
  if (kMode == kFailInit) {
    if (log) log(3, 0, __FILE__, __LINE__, "gyretest tuner: failing init on purpose");
    return ncclInternalError;
  }
  *context = new Context{nRanks, nNodes};
  return ncclSuccess;
}

// The v3+ behaviour over the cost table; v2 maps its answer onto this.
ncclResult_t costs(int func, size_t bytes, float (*t)[kNumProtocols], int* nChannels) {
  record("getCollInfo func=%d bytes=%zu ring-simple=%g tree-simple=%g ring-ll=%g", func, bytes,
         double(t[kAlgoRing][kProtoSimple]), double(t[kAlgoTree][kProtoSimple]), double(t[kAlgoRing][kProtoLL]));
  switch (kMode) {
    case kTreeAbove:
      if (func == kFuncAllReduce) {
        bool tree = bytes >= static_cast<size_t>(envLong("GYRETEST_TUNER_TREE_ABOVE", 65536));
        // Forced as operators do, whether or not the entry is in the table.
        (tree ? t[kAlgoTree][kProtoSimple] : t[kAlgoRing][kProtoSimple]) = 0.0f;
      }
      break;
    case kChannels: *nChannels = static_cast<int>(envLong("GYRETEST_TUNER_CHANNELS", 1)); break;
    case kGarbage:
      if (func == kFuncBroadcast) return ncclInternalError;
      t[kAlgoRing][kProtoSimple] = NAN;
      t[kAlgoTree][kProtoSimple] = -5.0f;
      t[kAlgoRing][kProtoLL] = INFINITY;
      t[kAlgoRing][kProtoLL128] = -3.0f;
      t[kAlgoNvls][kProtoSimple] = 0.0f;
      *nChannels = 1000;
      break;
    case kSlow: std::this_thread::sleep_for(std::chrono::milliseconds(envLong("GYRETEST_TUNER_SLEEP_MS", 200))); break;
    case kRingLL: t[kAlgoRing][kProtoLL] = 0.0f; break;
    default: break;
  }
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t finish(void* context) {
  record("finalize");
  delete static_cast<Context*>(context);
  return ncclSuccess;
}

// v2: an algorithm and protocol out, as NCCL's oldest table interface.
[[maybe_unused]] ncclResult_t collInfoV2(void*, int func, size_t bytes, int collNet, int nvls, int, int* algo,
                                         int* proto,
                        int* nChannels) {
  float t[kNumAlgorithms][kNumProtocols];
  for (auto& row : t)
    for (float& c : row) c = 1e6f;
  ncclResult_t r = costs(func, bytes, t, nChannels);
  record("v2 collNetSupport=%d nvlsSupport=%d", collNet, nvls);
  for (int a = 0; a < kNumAlgorithms; ++a)
    for (int p = 0; p < kNumProtocols; ++p)
      if (t[a][p] == 0.0f) *algo = a, *proto = p;
  return r;
}

[[maybe_unused]] ncclResult_t collInfoV3(void*, int func, size_t bytes, int pipeOps, float** table, int numAlgo,
                                         int numProto,
                        int* nChannels) {
  record("table numAlgo=%d numProto=%d pipeOps=%d", numAlgo, numProto, pipeOps);
  return costs(func, bytes, reinterpret_cast<float(*)[kNumProtocols]>(table), nChannels);
}

[[maybe_unused]] ncclResult_t collInfoV4(void* c, int func, size_t bytes, int pipeOps, float** table, int numAlgo,
                                         int numProto,
                        int regBuff, int* nChannels) {
  record("regBuff=%d", regBuff);
  return collInfoV3(c, func, bytes, pipeOps, table, numAlgo, numProto, nChannels);
}

[[maybe_unused]] ncclResult_t initV2(size_t nRanks, size_t nNodes, Logger log, void** context) {
  return initCommon(nRanks, nNodes, log, context);
}

[[maybe_unused]] ncclResult_t initV5(void** context, uint64_t commId, size_t nRanks, size_t nNodes, Logger log,
                    NvlDomainInfoV5* nvl, ConstantsV5* constants) {
  record("commId=%016llx nvlDomains=%d ranksPerDomain=%d..%d", static_cast<unsigned long long>(commId),
         nvl->nNvlDomains, nvl->minRanksPerNvlDomain, nvl->maxRanksPerNvlDomain);
  constants->baseLatencies[kAlgoRing][kProtoSimple] = 1.5;  // gyre says it does not use them
  return initCommon(nRanks, nNodes, log, context);
}

[[maybe_unused]] ncclResult_t chunkV6(void*, int func, size_t bytes, int algo, int proto, int nChannels,
                                      size_t* chunk) {
  record("getChunkSize func=%d bytes=%zu algo=%d proto=%d nChannels=%d chunk=%zu", func, bytes, algo, proto,
         nChannels, *chunk);
  long want = envLong("GYRETEST_TUNER_CHUNK", 0);
  if (want > 0) *chunk = static_cast<size_t>(want);
  return ncclSuccess;
}

}  // namespace

#if GYRETEST_TUNER_VERSION == 2
GYRETEST_EXPORT const TunerV2 ncclTunerPlugin_v2 = {"gyretest-v2", initV2, collInfoV2, finish};
#elif GYRETEST_TUNER_VERSION == 3
GYRETEST_EXPORT const TunerV3 ncclTunerPlugin_v3 = {"gyretest-v3", initV2, collInfoV3, finish};
#elif GYRETEST_TUNER_VERSION == 4
GYRETEST_EXPORT const TunerV4 ncclTunerPlugin_v4 = {"gyretest-v4", initV2, collInfoV4, finish};
#elif GYRETEST_TUNER_VERSION == 5
GYRETEST_EXPORT const TunerV5 ncclTunerPlugin_v5 = {"gyretest-v5", initV5, collInfoV4, finish};
#elif GYRETEST_TUNER_VERSION == 6
GYRETEST_EXPORT const TunerV6 ncclTunerPlugin_v6 = {"gyretest-v6", initV5, collInfoV4, finish, chunkV6};
// An older table too, as real plugins export: gyre must take the newest.
GYRETEST_EXPORT const TunerV5 ncclTunerPlugin_v5 = {"gyretest-v6-as-v5", initV5, collInfoV4, finish};
#elif GYRETEST_TUNER_VERSION == 7
GYRETEST_EXPORT const TunerV6 ncclTunerPlugin_v7 = {"gyretest-v7", initV5, collInfoV4, finish, chunkV6};
#endif
// GYRETEST_TUNER_VERSION 0: no tuner symbol at all.
GYRETEST_EXPORT int gyretest_tuner_version() { return GYRETEST_TUNER_VERSION; }
