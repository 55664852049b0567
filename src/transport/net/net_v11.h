// NCCL's ncclNet_v11_t and ncclNet_v12_t, for plugins built against NCCL
// 2.28 and later: init() returns a per-communicator context that listen()
// and connect() take, the traffic class moves from connect() to init(), and
// the table gains finalize() and setNetAttr(). v12 differs from v11 only in
// its properties (eight devices per virtual NIC, rail and plane ids).
// Written from the public facts of that ABI (member order and types); gyre
// reads such a plugin through net_adapters.h.
#pragma once

#include "src/transport/net/net_v10.h"

extern "C" {

// Physical devices one virtual NIC may fuse: 4 in v11, 8 in v12.
#define GYRE_NET_MAX_DEVS_PER_VNIC_V11 4
#define GYRE_NET_MAX_DEVS_PER_VNIC_V12 8

typedef struct {
  int ndevs;
  int devs[GYRE_NET_MAX_DEVS_PER_VNIC_V11];
} gyreNetVDeviceProps_v11_t;

typedef struct {
  int ndevs;
  int devs[GYRE_NET_MAX_DEVS_PER_VNIC_V12];
} gyreNetVDeviceProps_v12_t;

typedef gyreNetCommConfig_v10_t gyreNetCommConfig_v11_t;

// v9's members, then the most requests one multi-request may group.
typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;  // Mb/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  gyreNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} gyreNetProperties_v11_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  gyreNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} gyreNetProperties_v12_t;

// Hints setNetAttr() passes about a communicator's traffic (-1: undefined).
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} gyreNetCommAttr_v11_t;

typedef struct {
  gyreNetCommAttr_v11_t sendCommAttr;
  gyreNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} gyreNetAttr_v11_t;

// One table shape for both versions; only the properties and virtual-NIC
// structures behind the pointers differ.
#define GYRE_NET_V11_TABLE(Props, VProps, Name)                                                              \
  typedef struct {                                                                                            \
    const char* name;                                                                                         \
    ncclResult_t (*init)(void** ctx, uint64_t commId, gyreNetCommConfig_v11_t* config,                        \
                         gyreNetLogger_t logFunction, gyreNetProfilerCallback_t profFunction);                \
    ncclResult_t (*devices)(int* ndev);                                                                       \
    ncclResult_t (*getProperties)(int dev, Props* props);                                                     \
    ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);                              \
    ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,                                \
                            gyreNetDeviceHandle_v10_t** sendDevComm);                                         \
    ncclResult_t (*accept)(void* listenComm, void** recvComm, gyreNetDeviceHandle_v10_t** recvDevComm);       \
    ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);                     \
    ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,       \
                                void** mhandle);                                                              \
    ncclResult_t (*deregMr)(void* comm, void* mhandle);                                                       \
    ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,     \
                          void** request);                                                                    \
    ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,      \
                          void** phandles, void** request);                                                   \
    ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);  \
    ncclResult_t (*test)(void* request, int* done, int* sizes);                                               \
    ncclResult_t (*closeSend)(void* sendComm);                                                                \
    ncclResult_t (*closeRecv)(void* recvComm);                                                                \
    ncclResult_t (*closeListen)(void* listenComm);                                                            \
    ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);                              \
    ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);                                      \
    ncclResult_t (*makeVDevice)(int* d, VProps* props);                                                       \
    ncclResult_t (*finalize)(void* ctx);                                                                      \
    ncclResult_t (*setNetAttr)(void* ctx, gyreNetAttr_v11_t* netAttr);                                        \
  } Name

GYRE_NET_V11_TABLE(gyreNetProperties_v11_t, gyreNetVDeviceProps_v11_t, gyreNet_v11_t);
GYRE_NET_V11_TABLE(gyreNetProperties_v12_t, gyreNetVDeviceProps_v12_t, gyreNet_v12_t);
#undef GYRE_NET_V11_TABLE

}  // extern "C"
