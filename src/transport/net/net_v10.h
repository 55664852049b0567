// NCCL's ncclNet_v10_t, for plugins built against NCCL 2.25-2.27: v9 plus
// a profiler callback given to init(), a per-connection configuration
// (traffic class) given to connect(), and a profiler handle per isend and
// per received buffer. Written from the public facts of that ABI (member
// order and types); gyre reads such a plugin through net_adapters.h.
#pragma once

#include "src/transport/net/net_v9.h"

extern "C" {

// connect()'s trafficClass when the communicator sets none: the plugin's default.
#define GYRE_NET_TRAFFIC_CLASS_UNDEF (-1)

typedef struct {
  int trafficClass;
} gyreNetCommConfig_v10_t;

typedef gyreNetVDeviceProps_v9_t gyreNetVDeviceProps_v10_t;
typedef gyreNetProperties_v9_t gyreNetProperties_v10_t;
typedef gyreNetDeviceHandle_v8_t gyreNetDeviceHandle_v10_t;

// NCCL's profiler callback (ncclProfilerCallback_t): `type` 0 start, 1 stop,
// 2 update, 3 update and stop a network event under the parent pHandle.
typedef ncclResult_t (*gyreNetProfilerCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                                  void* extData);

typedef struct {
  const char* name;
  ncclResult_t (*init)(gyreNetLogger_t logFunction, gyreNetProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, gyreNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, gyreNetCommConfig_v10_t* config, void* handle, void** sendComm,
                          gyreNetDeviceHandle_v10_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, gyreNetDeviceHandle_v10_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                        void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** phandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, gyreNetVDeviceProps_v10_t* props);
} gyreNet_v10_t;

}  // extern "C"
