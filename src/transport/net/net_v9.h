// NCCL's ncclNet_v9_t, for plugins built against NCCL 2.23/2.24: the v8
// table with message sizes as size_t (isend, irecv), a `forceFlush`
// property, virtual NICs (vProps, makeVDevice) and per-operation size
// limits. Written from the public facts of that ABI (member order and
// types); gyre reads such a plugin through net_adapters.h.
#pragma once

#include "src/transport/net/net_v8.h"

extern "C" {

// Physical devices one virtual NIC may fuse (NCCL_NET_MAX_DEVS_PER_NIC in v9 and v10).
#define GYRE_NET_MAX_DEVS_PER_VNIC 4

typedef struct {
  int ndevs;
  int devs[GYRE_NET_MAX_DEVS_PER_VNIC];
} gyreNetVDeviceProps_v9_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;  // receives into device memory need iflush
  int speed;       // Mb/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  gyreNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;   // the largest message isend/irecv take
  size_t maxCollBytes;
} gyreNetProperties_v9_t;

// The device handle is unchanged since v8.
typedef gyreNetDeviceHandle_v8_t gyreNetDeviceHandle_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(gyreNetLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, gyreNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, gyreNetDeviceHandle_v9_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, gyreNetDeviceHandle_v9_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  // Creates a virtual NIC fusing props->devs; *d receives its index.
  ncclResult_t (*makeVDevice)(int* d, gyreNetVDeviceProps_v9_t* props);
} gyreNet_v9_t;

}  // extern "C"
