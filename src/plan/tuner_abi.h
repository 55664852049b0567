// The NCCL tuner plugin interface, versions 2 to 6 (the versions NCCL 2.30's
// ext-tuner headers define): the layouts, symbol names and values a plugin
// built against NCCL expects. A plugin exports one table per version it
// offers, as ncclTunerPlugin_vN; gyre drives the newest one it finds.
//
//   v2  getCollInfo returns an algorithm and protocol (no cost table)
//   v3  getCollInfo edits the cost table instead
//   v4  v3 plus regBuff (whether the user buffers are registered)
//   v5  init also takes the communicator id, NVLink domain facts and NCCL's
//       tuning constants; destroy is named finalize
//   v6  v5 plus an optional getChunkSize
#pragma once

#include <cstddef>
#include <cstdint>

#include "include/gyre.h"

namespace gyre::tuner {

// The cost table a plugin edits: float[kNumAlgorithms][kNumProtocols], row
// by row, passed as float** (NCCL casts its 2-D array the same way). An
// entry NCCL (or gyre) cannot or may not run holds kIgnore.
enum : int {
  kAlgoTree = 0,  // NCCL_ALGO_TREE
  kAlgoRing = 1,
  kAlgoCollNetDirect = 2,
  kAlgoCollNetChain = 3,
  kAlgoNvls = 4,
  kAlgoNvlsTree = 5,
  kAlgoPat = 6,
  kNumAlgorithms = 7,  // NCCL_NUM_ALGORITHMS
};
enum : int {
  kProtoLL = 0,  // NCCL_PROTO_LL
  kProtoLL128 = 1,
  kProtoSimple = 2,
  kNumProtocols = 3,  // NCCL_NUM_PROTOCOLS
};
constexpr int kUndef = -1;          // NCCL_ALGO_UNDEF, NCCL_PROTO_UNDEF
constexpr float kIgnore = -1.0f;    // NCCL_ALGO_PROTO_IGNORE

using CostCells = float[kNumAlgorithms][kNumProtocols];

// ncclFunc_t.
enum Func : int {
  kFuncBroadcast = 0,
  kFuncReduce = 1,
  kFuncAllGather = 2,
  kFuncReduceScatter = 3,
  kFuncAllReduce = 4,
};

// NCCL's logger signature (ncclDebugLogger_t; the level is ncclDebugLogLevel).
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

struct NvlDomainInfoV5 {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
};

constexpr int kNumHwLinks = 3;     // NVLink, PCI, network
constexpr int kNumCompCaps = 4;    // Volta, Ampere, Hopper, Blackwell
constexpr int kNumTuningScales = 3;  // 1, 2, 4 nodes

struct ConstantsV5 {
  double baseLatencies[kNumAlgorithms][kNumProtocols];
  double hwLatencies[kNumHwLinks][kNumAlgorithms][kNumProtocols];
  double llMaxBws[kNumCompCaps][kNumTuningScales];
  double perChMaxRingLL128Bws[kNumCompCaps][kNumTuningScales];
  double perChMaxTreeLL128Bws[kNumCompCaps][kNumTuningScales];
  double perChMaxTreeBws[kNumCompCaps][kNumTuningScales];
  double perChMaxNVLSTreeBws[kNumCompCaps][kNumTuningScales];
};

// The function types the versions share (getCollInfo's cost-table form
// from v3; regBuff from v4; init with the communicator's facts from v5).
using InitV2 = ncclResult_t (*)(size_t nRanks, size_t nNodes, Logger logFunction, void** context);
using InitV5 = ncclResult_t (*)(void** context, uint64_t commId, size_t nRanks, size_t nNodes, Logger logFunction,
                                NvlDomainInfoV5* nvlDomainInfo, ConstantsV5* constants);
using CollInfoV3 = ncclResult_t (*)(void* context, int collType, size_t nBytes, int numPipeOps,
                                    float** collCostTable, int numAlgo, int numProto, int* nChannels);
using CollInfoV4 = ncclResult_t (*)(void* context, int collType, size_t nBytes, int numPipeOps,
                                    float** collCostTable, int numAlgo, int numProto, int regBuff, int* nChannels);
using Finish = ncclResult_t (*)(void* context);  // destroy (v2..v4), finalize (v5, v6)

struct TunerV2 {
  const char* name;
  InitV2 init;
  ncclResult_t (*getCollInfo)(void* context, int collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  Finish destroy;
};

struct TunerV3 {
  const char* name;
  InitV2 init;
  CollInfoV3 getCollInfo;
  Finish destroy;
};

struct TunerV4 {
  const char* name;
  InitV2 init;
  CollInfoV4 getCollInfo;
  Finish destroy;
};

struct TunerV5 {
  const char* name;
  InitV5 init;
  CollInfoV4 getCollInfo;
  Finish finalize;
};

// v6 = v5 + getChunkSize (may be null): the plugin may change the bytes one
// pipeline step carries for the chosen algorithm, protocol and channels.
struct TunerV6 {
  const char* name;
  InitV5 init;
  CollInfoV4 getCollInfo;
  Finish finalize;
  ncclResult_t (*getChunkSize)(void* context, int collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
};

constexpr int kOldestVersion = 2, kNewestVersion = 6;

}  // namespace gyre::tuner
