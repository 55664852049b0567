/*
 * gyre.h — the whole public C API of gyre.
 *
 * gyre exposes NCCL's ABI: every type, enum value, struct layout and function
 * signature below is a fact of NCCL's public interface, so a program compiled
 * against NCCL's nccl.h links and runs against libgyre unchanged. Additions
 * that NCCL does not have use the `gyre` prefix.
 */
#ifndef GYRE_H_
#define GYRE_H_

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* cudaStream_t is an opaque pointer; declaring it here lets host-only programs
 * use the API without the CUDA headers. The typedef is identical to CUDA's. */
typedef struct CUstream_st* cudaStream_t;

#ifdef __cplusplus
extern "C" {
#endif

/* Version of NCCL's API that this ABI matches (the ncclConfig_t layout below
 * is the one NCCL 2.28 defines). */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

/* gyre's own release, independent of the NCCL API level it implements. */
#define GYRE_MAJOR 0
#define GYRE_MINOR 1
#define GYRE_PATCH 0

typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* Memory windows (ncclCommWindowRegister) and their flags. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values (gyre accepts them; its kernels have no CTA policy). */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags: shrink a healthy communicator, or first stop its
 * in-flight operations (after a peer failed). */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
/* ncclCommRevoke flags (none defined yet; must be 0). */
#define NCCL_REVOKE_DEFAULT 0x00

/* Communicator options. `size`, `magic` and `version` let the library read
 * configs written against older, shorter versions of this struct. */
typedef struct ncclConfig_v22800 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

#define NCCL_CONFIG_MAGIC 0xcafebeef
#define NCCL_CONFIG_INITIALIZER                                                        \
  {                                                                                    \
    sizeof(ncclConfig_t), NCCL_CONFIG_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT,           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,           \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT                                   \
  }

/* Reduction operators. Values at or above ncclNumOps are handles created by
 * ncclRedOpCreatePreMulSum. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/* ---- Library and error information ---------------------------------------- */
ncclResult_t ncclGetVersion(int* version);
const char* ncclGetErrorString(ncclResult_t result);
/* Text of the most recent failure seen by the calling thread (or, if that
 * thread saw none, by the process). `comm` may be NULL. */
const char* ncclGetLastError(ncclComm_t comm);
/* Makes the next log line read NCCL_DEBUG, NCCL_DEBUG_SUBSYS and
 * NCCL_DEBUG_FILE again (from the environment as it is then). */
void ncclResetDebugInit(void);

/* What ncclGroupSimulateEnd reports; initialise with NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime; /* microseconds */
} ncclSimInfo_t;
#define NCCL_SIM_INFO_MAGIC 0x74685283u
#define NCCL_SIM_INFO_INITIALIZER \
  { sizeof(ncclSimInfo_t), NCCL_SIM_INFO_MAGIC, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_UNDEF_FLOAT }

/* The device-side API's types (NCCL 2.28 nccl_device); gyre refuses them. */
struct ncclDevComm;
struct ncclDevCommRequirements;

/* ---- Communicator lifecycle ------------------------------------------------ */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
/* One communicator per entry of devlist (NULL: devices 0..ndev-1), all in
 * this process; gyre accepts a device listed more than once. */
ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist);
/* Ranks with the same color form a new communicator, ordered by key (ties by
 * old rank); NCCL_SPLIT_NOCOLOR gives *newcomm = NULL. Collective over comm. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
/* Like ncclCommInitRankConfig with nId ids made by different ranks (NCCL
 * spreads the rendezvous over them); gyre rendezvouses at commIds[0]. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
/* The ranks not in excludeRanksList form a new communicator (same order);
 * only they call it. NCCL_SHRINK_ABORT first stops in-flight work. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
/* Stops in-flight operations; afterwards only shrink, destroy or abort. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Memory and registration ---------------------------------------------- */
/* Device memory for collectives (cudaMalloc underneath). In a process with
 * no CUDA device (a build without CUDA, or no GPU visible) it returns host
 * memory as gyreMemAllocHost does, for host-memory communicators. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
/* Registration lets NCCL use a buffer without copies; gyre records it and
 * checks the handle at deregistration (its staged path copies anyway). */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
/* The device-side API: not supported by gyre (returns ncclInvalidUsage). */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);

/* ---- Reduction operators ------------------------------------------------------ */
/* Creates an operator that multiplies every input by *scalar (of `datatype`)
 * and sums. With ncclScalarHostImmediate the value is copied now; with
 * ncclScalarDevice the pointer is read when each collective starts. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- Collectives ------------------------------------------------------------ */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
/* In-place Broadcast (the older name). */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
/* recvbuff holds nranks*sendcount elements; in place when
 * sendbuff == recvbuff + rank*sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
/* sendbuff holds nranks*recvcount elements; in place when
 * recvbuff == sendbuff + rank*recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* ---- Point-to-point and groups ---------------------------------------------- */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
/* Calls between ncclGroupStart and the matching ncclGroupEnd (groups nest)
 * are started together at the outermost ncclGroupEnd: many sends and
 * receives progress at once, so an all-to-all written as a group never
 * deadlocks, and one thread may drive several communicators. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
/* Ends the group like ncclGroupEnd but runs nothing: the calls are dropped
 * and simInfo->estimatedTime gets the cost model's time for them (us). */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* ---- gyre extensions --------------------------------------------------------- */

/* Creates a host-memory communicator: buffers passed to its collectives are
 * ordinary host pointers, the stream argument must be NULL, and each call
 * returns once its result is in place. Arguments are those of
 * ncclCommInitRankConfig; `config` may be NULL. */
ncclResult_t gyreCommInitRankHost(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                  ncclConfig_t* config);

/* The host-memory form of ncclCommInitRankScalable: with nId ids (each from
 * its own ncclGetUniqueId, 1 <= nId <= nranks), the root of commIds[i]
 * gathers ranks i*nranks/nId .. (i+1)*nranks/nId - 1, so no root gathers
 * every rank. */
ncclResult_t gyreCommInitRankScalableHost(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                          ncclUniqueId* commIds, ncclConfig_t* config);

/* nranks host-memory communicators of one clique, all in this process (the
 * host analogue of ncclCommInitAll). Drive them from one thread with
 * ncclGroupStart/ncclGroupEnd around their calls. */
ncclResult_t gyreCommInitAllHost(ncclComm_t* comms, int nranks);

/* Sets *isHost to 1 for a communicator made by gyreCommInitRankHost, else 0. */
ncclResult_t gyreCommIsHost(const ncclComm_t comm, int* isHost);

/* Sets how long any wait on a peer inside this communicator's calls may last
 * before the call fails (GYRE_TIMEOUT, which every communicator starts with,
 * is read once per process). `seconds` is in (0, 86400]; fractions count.
 * Applies to calls issued afterwards: call it between calls, not while a call
 * of this communicator runs on another thread. Communicators split or shrunk
 * from this one start again from GYRE_TIMEOUT. */
ncclResult_t gyreCommSetTimeout(ncclComm_t comm, double seconds);

/* Host memory that the other ranks of this host can map (page-aligned,
 * zeroed, at least `size` bytes; *ptr is NULL for size 0). Buffers from it
 * let a host-memory communicator's single-copy transfers (Broadcast and
 * AllGather of large messages) copy straight from a peer's buffer with
 * memcpy instead of process_vm_readv. Any host buffer works with any host
 * communicator; this one is only faster. Free it with gyreMemFreeHost or
 * ncclMemFree. */
ncclResult_t gyreMemAllocHost(void** ptr, size_t size);
ncclResult_t gyreMemFreeHost(void* ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GYRE_H_ */
