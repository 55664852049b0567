// The network interface every network plugs into, in the shape of NCCL's
// ncclNet_v8_t: a C table of functions, so an external NCCL net plugin
// (libnccl-net-<name>.so) and gyre's built-in networks are called alike.
//
// Written from the public facts of that ABI (member order and types, the
// constants' values); a plugin compiled against NCCL's header must find its
// table read here member by member. Only what v8 defines is here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "include/gyre.h"

extern "C" {

// Bytes of the handle listen() fills and the peer's connect() reads.
#define GYRE_NET_HANDLE_MAXSIZE 128

// Pointer kinds a network can send from and receive into (regMr's `type`).
#define GYRE_NET_PTR_HOST 0x1
#define GYRE_NET_PTR_CUDA 0x2
#define GYRE_NET_PTR_DMABUF 0x4

// NCCL's ncclDebugLogLevel values.
enum gyreNetLogLevel { kNetLogNone = 0, kNetLogVersion = 1, kNetLogWarn = 2, kNetLogInfo = 3, kNetLogAbort = 4,
                       kNetLogTrace = 5 };
typedef void (*gyreNetLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

typedef struct {
  int netDeviceType;  // 0: host (no device-side networking)
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} gyreNetDeviceHandle_v8_t;

typedef struct {
  char* name;       // device name ("mlx5_0")
  char* pciPath;    // sysfs path of the PCI device
  uint64_t guid;
  int ptrSupport;   // GYRE_NET_PTR_* bits
  int regIsGlobal;  // a registration is valid on every comm of the device
  int speed;        // Mb/s
  int port;
  float latency;    // µs
  int maxComms;
  int maxRecvs;     // most buffers one irecv may group
  int netDeviceType;
  int netDeviceVersion;
} gyreNetProperties_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(gyreNetLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, gyreNetProperties_v8_t* props);
  // Non-blocking set-up: connect() and accept() may return a null comm, to be
  // called again until it is set.
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, gyreNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, gyreNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  // A null *request: the receiver has posted no buffer yet; try again later.
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  // *done set once the request completed; `sizes` gets the bytes received.
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} gyreNet_v8_t;

}  // extern "C"
