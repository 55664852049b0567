// The NCCL profiler plugin interface, version 5 (NCCL's
// ext-profiler/.../profiler_v5.h): the layouts and values a plugin built
// against NCCL expects. gyre fills the API events (group, collective and
// point-to-point API calls), the group, collective and point-to-point
// events, ProxyOp and ProxyStep events for the host executor's lane steps
// and the device paths' KernelLaunch and KernelCh events (step_events.h);
// the proxy control and network ones are not delivered.
// Version 6 of the interface has the same function table and extends the
// descriptor's union with copy-engine events only (NCCL's copy-engine
// collectives, which gyre does not deliver): the members gyre fills sit at
// the same places, so a v6 plugin is driven through these types too.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "include/gyre.h"

namespace gyre::profiler {

// Event type bits (descriptor `type`, init's activation mask).
enum : int {
  kGroup = 1 << 0,
  kColl = 1 << 1,
  kP2p = 1 << 2,
  kProxyOp = 1 << 3,
  kProxyStep = 1 << 4,
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,
  kNetPlugin = 1 << 7,
  kGroupApi = 1 << 8,
  kCollApi = 1 << 9,
  kP2pApi = 1 << 10,
  kKernelLaunch = 1 << 11,
};

// Event states (recordEventState); gyre records the group API
// transitions and its steps' (step_events.h).
enum EventState : int {
  kProxyStepSendGPUWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGPUWait = 12,
  kProxyStepSendPeerWait = 20,
  kKernelChStop = 22,
  kGroupStartApiStop = 23,
  kGroupEndApiStart = 24,
};

struct EventDescr {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;
    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;
    struct {
      void* stream;
    } kernelLaunch;
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

union EventStateArgs {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
};

// NCCL's logger signature (ncclDebugLogger_t).
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

struct PluginV5 {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, Logger logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescr* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
  ncclResult_t (*finalize)(void* context);
};

}  // namespace gyre::profiler
