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

/* As NCCL's nccl.h, this header brings in the CUDA runtime and the half,
 * bfloat16 and fp8 types where the CUDA headers are on the include path, so
 * programs written for NCCL that rely on them build unchanged. gyre's own
 * sources define GYRE_NO_CUDA_HEADERS: they do not need them. */
#if !defined(GYRE_NO_CUDA_HEADERS) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if __has_include(<cuda_bf16.h>)
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && __has_include(<cuda_fp8.h>)
#include <cuda_fp8.h>
#endif
#endif
#endif

/* Without the CUDA headers, cudaStream_t is declared here (an opaque
 * pointer, the typedef identical to CUDA's) so host-only programs can use
 * the API. */
#ifndef CUDART_VERSION
typedef struct CUstream_st* cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Version of NCCL's API that this ABI matches (the struct layouts below are
 * those of NCCL's ncclConfig_v23100 and ncclCollConfig_v23100). */
#define NCCL_MAJOR 2
#define NCCL_MINOR 31
#define NCCL_PATCH 0
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 23100
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
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f
/* The magic of every versioned struct (ncclConfig_t, ncclCollConfig_t). */
#define NCCL_API_MAGIC 0xcafebeef

/* Memory windows (ncclCommWindowRegister) and their flags. */
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_GIN_ONLY 0x04
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

/* ncclConfig_t.hostCftMode and .nvlsHostMode values (gyre accepts them; it
 * has neither host CFT nor NVLS). nvlsHostMode flags may be combined. */
typedef enum {
  ncclHostCftDefault = NCCL_CONFIG_UNDEF_INT,
  ncclHostCftEnable = 1,
  ncclHostCftDisable = 2,
  ncclHostCftFallback = 3
} ncclHostCftMode_t;
typedef enum {
  ncclNvlsHostModeDefault = NCCL_CONFIG_UNDEF_INT,
  ncclNvlsHostModeEnable = 0,
  ncclNvlsHostModeDisableTransport = 1 << 0,
  ncclNvlsHostModeDisableSymmetricMultimem = 1 << 1,
  ncclNvlsHostModeDisable = INT_MAX
} ncclNvlsHostMode_t;

/* Communicator options. `size`, `magic` and `version` let the library read
 * configs written against older, shorter versions of this struct (fields are
 * only ever appended). */
typedef struct ncclConfig_v23100 {
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
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
  int launchOrderImplicit;
  int numRmaSig;
  int rmaEagerInit;
  int hostCftMode;
  int nvlsHostMode;
} ncclConfig_t;

#define NCCL_CONFIG_MAGIC NCCL_API_MAGIC
#define NCCL_CONFIG_INITIALIZER                                                                \
  {                                                                                            \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT,            \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
        NCCL_CONFIG_UNDEF_INT                                                                  \
  }

/* A vendor option of a per-collective config: a list linked through `next`.
 * NCCL ignores every one, and so does gyre. */
typedef struct ncclConfigExt {
  struct ncclConfigExt* next;
  struct {
    int vendorId;
    int optionId;
  } key;
  union {
    int i;
    const char* s;
    void* raw;
  } val;
} ncclConfigExt_t;

/* Options of one collective call (the nccl*Config entry points), versioned
 * like ncclConfig_t. It must be the same on every rank. */
typedef struct ncclCollConfig_v23100 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclConfigExt_t* ext;
  int minCTAs;
  int maxCTAs;
  int nvlsCTAs;
  int cgaClusterSize;
  /* Algorithms this call may use, in NCCL_ALGO's syntax; NULL or "" lets
   * the library choose. */
  const char* algSelection;
  /* 1 (the default): a selection that cannot run is an error; 0: the
   * library then chooses. */
  int forceAlgSelection;
  int CTAPolicy;
  uint64_t userProfilerTag;
} ncclCollConfig_t;

#define NCCL_COLLCONFIG_INITIALIZER                                                           \
  {                                                                                           \
    sizeof(ncclCollConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_PTR,       \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                  \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, 1, NCCL_CONFIG_UNDEF_INT, 0             \
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
  { sizeof(ncclSimInfo_t), NCCL_SIM_INFO_MAGIC, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT }

/* The device-side API's types (nccl_device.h defines them). */
struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclCommProperties;
struct ncclTeam;
struct ncclMultimemHandle;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclLLA2AHandle;

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
/* A fresh id for ncclCommGrow, made by the rank that will be the grown
 * communicator's root (one unconsumed id per communicator at a time). */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
/* Adds ranks: a communicator of nRanks in which the existing ranks keep
 * their ranks and the new ones take the ranks after them. Existing ranks
 * pass comm (the root uniqueId from ncclCommGetUniqueId, the others NULL)
 * and rank -1; new ranks pass comm NULL, the id and their rank. */
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config);
/* Stops in-flight operations; afterwards only shrink, destroy or abort. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

/* Suspending releases the memory the communicator can rebuild (flags:
 * NCCL_SUSPEND_MEM); it takes no calls until ncclCommResume. */
#define NCCL_SUSPEND_MEM 0x01
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* bytes of device memory a suspend would release */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* bytes of device memory kept while suspended */
  ncclStatGpuMemTotal = 3      /* bytes of device memory the communicator holds */
} ncclCommMemStat_t;
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

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
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
/* The host side of the device API (nccl_device.h): a device communicator
 * for kernels whose ranks all reach each other by loads and stores (the LSA
 * team); requirements of GIN (network) or multimem resources are refused,
 * naming what is missing. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);
/* What the communicator supports (nccl_device.h's ncclCommProperties_t, made
 * with NCCL_COMM_PROPERTIES_INITIALIZER): the device API and host one-sided
 * operations where every rank is load/store accessible; no multimem, no GIN. */
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, struct ncclCommProperties* props);
/* A window's bytes at `offset` as this rank addresses them on an LSA peer
 * (by LSA rank, or by world rank). */
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
/* Multimem (NVLink SHARP) addresses: gyre has none, so NULL and ncclSuccess,
 * as NCCL answers where multimem is not supported. */
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, struct ncclMultimemHandle multimem,
                                          void** outPtr);
/* The communicator's world and LSA teams, its rail (the ranks with this
 * rank's LSA rank, one per LSA team), and a team's rank as a world or LSA
 * rank. */
struct ncclTeam ncclTeamWorld(ncclComm_t comm);
struct ncclTeam ncclTeamLsa(ncclComm_t comm);
struct ncclTeam ncclTeamRail(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, struct ncclTeam team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, struct ncclTeam team, int rank);
/* Resource requirements to chain into a device communicator's
 * resourceRequirementsList, with the handle device code names them by: a
 * set of LSA barriers over a team (ncclLsaBarrierSession), and the slots of
 * the low-latency all-to-all (ncclLLA2ASession; ncclLLA2ACalcSlots gives the
 * slots maxElts values of maxEltSize bytes take, or -1 for bad input). */
ncclResult_t ncclLsaBarrierCreateRequirement(struct ncclTeam team, int nBarriers,
                                             struct ncclLsaBarrierHandle* outHandle,
                                             struct ncclDevResourceRequirements* outReq);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, struct ncclLLA2AHandle* outHandle,
                                        struct ncclDevResourceRequirements* outReq);

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
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);

/* Per-collective configuration: each collective with a trailing config
 * (NULL: as the plain call). gyre honours algSelection with the algorithms it
 * has (Ring, Tree, Direct: NCCL_ALGO's names and syntax) and accepts the CTA
 * fields, which its executors have no use for. */
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                              const ncclCollConfig_t* config);
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                     const ncclCollConfig_t* config);
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                              ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);

/* One-sided operations on windows. gyre refuses them (ncclInvalidUsage): its
 * windows are not mapped by peers and its transports have no remote write
 * with a signal. */
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
typedef struct {
  int opCnt;
  int peer;
  int sigIdx;
  int ctx;
} ncclWaitSignalDesc_t;
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);

/* Calls between ncclGroupStart and the matching ncclGroupEnd (groups nest)
 * are started together at the outermost ncclGroupEnd: many sends and
 * receives progress at once, so an all-to-all written as a group never
 * deadlocks, and one thread may drive several communicators. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
/* Ends the group like ncclGroupEnd but runs nothing: the calls are dropped
 * and simInfo->estimatedTime gets the cost model's time for them (us). */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* ---- Parameters ----------------------------------------------------------------- */
/* The settings gyre reads (docs/ENVIRONMENT.md), by name: "NCCL_BUFFSIZE" or
 * "BUFFSIZE" (NCCL_ may be left out). A handle stays valid for the process. */
typedef struct ncclParamHandle* ncclParamHandle_t;
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
/* A numeric setting as a typed integer (a value out of the type's range is
 * an error, not truncated). */
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
/* The value as text, valid until the calling thread's next ncclParamGetStr. */
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
/* The value's bytes: an int64_t for numeric settings, the text with its
 * terminating NUL otherwise. *len gets the length, which must fit maxLen. */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
/* By key, as text (valid until the thread's next call of it). */
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
/* Every setting's name (valid until the thread's next call of it). */
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
/* Logs every setting, its value and where it came from (NCCL_DEBUG=INFO). */
void ncclParamDumpAll(void);

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
/* Copies `bytes` from src to dst (which must not overlap) as a host
 * collective writes a large output: with non-temporal ("streaming") stores
 * on x86-64, which write each destination line once instead of first
 * reading it, and memcpy elsewhere; the stores are complete when it returns.
 * It pays where the destination is not read soon and outgrows the caches
 * (GYRE_STREAMING_STORES_MIN_BYTES; bench/compare/path_costs times it). */
ncclResult_t gyreMemcpyStreaming(void* dst, const void* src, size_t bytes);

/* Sets the pre-shared key that encrypts and authenticates gyre's socket
 * connections (the rendezvous, bootstrap, and socket/net transport control
 * and data connections): AES-256-GCM records whose keys are derived (HKDF)
 * from this key, the unique id's secret and random bytes of each connection.
 * Every process of a job sets the same key before ncclGetUniqueId or init
 * (as NCCL 2.32's ncclSetEncryption asks). Without a key, GYRE_ENCRYPT=auto
 * (the default) already encrypts connections between hosts with keys from
 * the unique id's random secret; a key is needed with NCCL_COMM_ID, whose id
 * has no random secret. 16..4096 bytes; the key is copied and wiped from
 * gyre's memory when replaced; key = NULL with bytes = 0 forgets it.
 * Returns ncclInvalidUsage when gyre was built without OpenSSL 3. */
ncclResult_t gyreSetEncryptionKey(const void* key, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GYRE_H_ */
