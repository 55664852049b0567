/* nccl_device/core.h — the device communicator, teams and windows of NCCL's
 * device-side API, for ranks that reach each other's memory by loads and
 * stores (the LSA team: ranks of one process, or processes whose GPUs have
 * peer access). The names, signatures and the user-visible fields of
 * ncclDevComm are NCCL's, so kernels written for NCCL compile unchanged; the
 * contents of ncclWindow_vidmem and the fields past NCCL's documented ones
 * are gyre's (a window carries a table of its peers' addresses instead of
 * NCCL's flat virtual-memory layout).
 *
 * Every device function here is __host__ __device__, so a test can run the
 * same code on host threads against the fake CUDA runtime's memory. */
#ifndef GYRE_NCCL_DEVICE_CORE_H_
#define GYRE_NCCL_DEVICE_CORE_H_

#include "../nccl.h"

#ifdef __cplusplus
#include <stdio.h>
#endif

#ifndef __cplusplus
#include <stdbool.h>
#endif

#if defined(__CUDACC__)
#define GYRE_DEVICE_FN __host__ __device__ inline
#else
#define GYRE_DEVICE_FN inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclTeam ncclTeam_t;
typedef struct ncclWindow_vidmem ncclWindow_vidmem_t;

struct ncclMultimemHandle {
  void* mcBasePtr; /* always NULL: gyre has no multimem (NVLink SHARP) */
};
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

/* A set of LSA barriers in the device communicator's resource window. */
struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
};
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
/* Network barriers: never created (gyre refuses GIN), kept for the layout. */
struct ncclGinBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
};
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
};
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;
typedef struct ncclCommProperties ncclCommProperties_t;

typedef enum {
  NCCL_GIN_CONNECTION_NONE = 0,
  NCCL_GIN_CONNECTION_FULL = 1,
  NCCL_GIN_CONNECTION_RAIL = 2
} ncclGinConnectionType_t;

typedef enum { NCCL_GIN_TYPE_NONE = 0, NCCL_GIN_TYPE_PROXY = 2, NCCL_GIN_TYPE_GDAKI = 3 } ncclGinType_t;

/* What a device communicator is asked to provide. Versioned like
 * ncclConfig_t: initialise with NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER. */
struct ncclDevCommRequirements {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int worldGinBarrierCount;
};

#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER                                                       \
  {                                                                                                  \
    sizeof(ncclDevCommRequirements_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NULL, NULL, false, 0, 0, 0, \
        0, 0, false, 4, 0, 0, NCCL_GIN_CONNECTION_NONE, false, 0, 0                                  \
  }

/* A list (through `next`) of buffers and GIN signals/counters a device
 * communicator should reserve. A buffer's handle names it in the
 * communicator's resource window (ncclGetResourceBuffer*Pointer). */
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};

struct ncclTeam {
  int nRanks, rank, stride;
};

/* A list of teams a device communicator should set up. */
struct ncclTeamRequirements {
  ncclTeamRequirements_t* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};

/* What ncclCommQueryProperties reports. */
struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  ncclGinType_t ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  ncclGinType_t railedGinType;
};

/* Every member named, so programs built with -Wextra get no warning. */
#define NCCL_COMM_PROPERTIES_INITIALIZER \
  { sizeof(ncclCommProperties_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, 0, 0, 0, 0, false, false, \
    (ncclGinType_t)0, 0, false, (ncclGinType_t)0 }

/* A registered window as device code reads it (the handle ncclWindow_t
 * points to it, in memory the device can read). Its LSA team is ranks
 * lsaWorldBase .. lsaWorldBase + lsaSize - 1; lsaBases[i] is where LSA rank
 * i's buffer is mapped in this rank's address space. */
struct ncclWindow_vidmem {
  uint64_t magic;
  char* userPtr;
  size_t size;
  int worldRank, nRanks;
  int lsaRank, lsaSize;
  int lsaWorldBase;
  uint32_t winFlags;
  char* const* lsaBases;
  void* hostRecord; /* gyre's bookkeeping; never read by device code */
};

typedef struct ncclDevCommWindowTable* ncclDevCommWindowTable_t;

/* A device communicator: passed by value to kernels. rank/nRanks are the
 * world team, lsaRank/lsaSize the LSA team (ranks lsaWorldBase ..). */
struct ncclDevComm {
  unsigned int magic;
  unsigned int version;
  int rank, nRanks;
  uint32_t nRanks_rcp32;
  int lsaRank, lsaSize;
  uint32_t lsaSize_rcp32;
  ncclDevCommWindowTable_t windowTable; /* NULL: gyre looks windows up by handle */
  ncclWindow_t resourceWindow;          /* the barriers' and requested buffers' memory */
  ncclMultimemHandle_t lsaMultimem;
  ncclLsaBarrierHandle_t lsaBarrier;
  ncclGinBarrierHandle_t railGinBarrier;
  uint8_t ginConnectionCount; /* 0: gyre has no GIN */
  int ginSignalCount;
  int ginCounterCount;
  uint32_t ginContextCount;
  bool ginIsRailed;
  uint32_t* abortFlag;
  ncclGinBarrierHandle_t worldGinBarrier;
  int lsaWorldBase; /* gyre: world rank of LSA rank 0 */
};

/* Host side of the device API. */
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs, ncclDevComm_t* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void** outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void** outPtr);
/* No multimem: both give NULL (and ncclSuccess), as NCCL does without it. */
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset, ncclMultimemHandle_t multimem,
                                          void** outPtr);
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

#ifdef __cplusplus
} /* extern "C" */

/* What a device call gyre cannot serve does: say which and stop the kernel
 * (a trap fails the launch, so the stream reports an error), rather than
 * move nothing and report success. */
namespace gyre_device {
[[noreturn]] GYRE_DEVICE_FN void unavailable(const char* what) {
  printf("gyre: %s is not available (%s)\n", what, "gyre's device API serves load/store-accessible peers only");
#if defined(__CUDA_ARCH__)
  __trap();
  for (;;) {
  }
#else
  fflush(stdout);  // a host emulation's output may be a pipe
  __builtin_trap();
#endif
}
}  // namespace gyre_device

/* The tags device code names teams by (the world, the load-store-accessible
 * ranks, the rail). */
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};

/* ---- Teams ----------------------------------------------------------------
 * A team is nRanks ranks of a parent, `stride` apart; `rank` is this rank's
 * place in it. */
GYRE_DEVICE_FN ncclTeam ncclTeamWorld(ncclDevComm const& comm) { return ncclTeam{comm.nRanks, comm.rank, 1}; }
GYRE_DEVICE_FN ncclTeam ncclTeamLsa(ncclDevComm const& comm) { return ncclTeam{comm.lsaSize, comm.lsaRank, 1}; }
/* The ranks with this rank's LSA rank on every LSA team. */
GYRE_DEVICE_FN ncclTeam ncclTeamRail(ncclDevComm const& comm) {
  return ncclTeam{comm.nRanks / comm.lsaSize, comm.rank / comm.lsaSize, comm.lsaSize};
}

/* Whether rank bPeer of team b is a member of team a (both teams of one
 * parent). */
GYRE_DEVICE_FN bool ncclTeamRankIsMember(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  int delta = (bPeer - b.rank) * b.stride;  // bPeer's distance from this rank in the parent
  if (delta % a.stride != 0) return false;
  int aPeer = a.rank + delta / a.stride;
  return aPeer >= 0 && aPeer < a.nRanks;
}
/* Rank bPeer of team b as a rank of team a (team a must hold it). */
GYRE_DEVICE_FN int ncclTeamRankToTeam(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  return a.rank + (bPeer - b.rank) * b.stride / a.stride;
}
GYRE_DEVICE_FN int ncclTeamRankToWorld(ncclDevComm const& comm, ncclTeam team, int rank) {
  return comm.rank + (rank - team.rank) * team.stride;
}
GYRE_DEVICE_FN int ncclTeamRankToLsa(ncclDevComm const& comm, ncclTeam team, int rank) {
  return ncclTeamRankToWorld(comm, team, rank) - comm.lsaWorldBase;
}
/* The team of `innerSize` consecutive ranks of `parent` holding this rank,
 * and the team of this rank's place in every such block. */
GYRE_DEVICE_FN ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent, int innerSize) {
  return ncclTeam_t{innerSize, parent.rank % innerSize, parent.stride};
}
GYRE_DEVICE_FN ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent, int innerSize) {
  return ncclTeam_t{parent.nRanks / innerSize, parent.rank / innerSize, parent.stride * innerSize};
}
/* The index'th rank of parent that is not in subset (a subset of parent). */
GYRE_DEVICE_FN int ncclTeamRankInDifference(ncclTeam_t parent, ncclTeam_t subset, int index) {
  for (int r = 0; r < parent.nRanks; ++r) {
    if (ncclTeamRankIsMember(subset, parent, r)) continue;
    if (index-- == 0) return r;
  }
  return -1;
}

/* ---- Windows ---------------------------------------------------------------
 * Addresses of a window's bytes at `offset`, as this rank reaches them:
 * its own, an LSA peer's (by LSA rank), any peer's (by world rank or by a
 * team's rank; NULL for a peer outside the LSA team). */
GYRE_DEVICE_FN void* ncclGetLocalPointer(ncclWindow_t w, size_t offset) { return w->userPtr + offset; }
GYRE_DEVICE_FN void* ncclGetLsaPointer(ncclWindow_t w, size_t offset, int peer) {
  return w->lsaBases[peer] + offset;
}
GYRE_DEVICE_FN void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer) {
  int lsaPeer = peer - w->lsaWorldBase;
  if (lsaPeer < 0 || lsaPeer >= w->lsaSize) return nullptr;
  return w->lsaBases[lsaPeer] + offset;
}
GYRE_DEVICE_FN void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, ncclTeam tm, int peer) {
  return ncclGetPeerPointer(w, offset, w->worldRank + (peer - tm.rank) * tm.stride);
}
/* No multimem: NULL, as NCCL gives where multimem is not set up. */
GYRE_DEVICE_FN void* ncclGetMultimemPointer(ncclWindow_t, size_t, ncclMultimemHandle) { return nullptr; }
GYRE_DEVICE_FN void* ncclGetLsaMultimemPointer(ncclWindow_t, size_t, ncclDevComm const&) { return nullptr; }

/* ---- Resource buffers -------------------------------------------------------
 * A handle is its buffer's offset in the resource window, in units of
 * 16 bytes (so 64 GiB of resources fit in 32 bits). */
GYRE_DEVICE_FN size_t ncclGetResourceBufferOffset(ncclDevResourceHandle_t h) { return size_t(h) * 16; }
GYRE_DEVICE_FN void* ncclGetResourceBufferLocalPointer(ncclDevComm const& comm, ncclDevResourceHandle h) {
  return ncclGetLocalPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h));
}
GYRE_DEVICE_FN void* ncclGetResourceBufferLsaPointer(ncclDevComm const& comm, ncclDevResourceHandle h, int peer) {
  return ncclGetLsaPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), peer);
}
GYRE_DEVICE_FN void* ncclGetResourceBufferPeerPointer(ncclDevComm const& comm, ncclDevResourceHandle h,
                                                      ncclTeam team, int peer) {
  return ncclGetPeerPointer(comm.resourceWindow, ncclGetResourceBufferOffset(h), team, peer);
}
GYRE_DEVICE_FN void* ncclGetResourceBufferMultimemPointer(ncclDevComm const&, ncclDevResourceHandle,
                                                          ncclMultimemHandle) {
  return nullptr;
}
GYRE_DEVICE_FN void* ncclGetResourceBufferLsaMultimemPointer(ncclDevComm const&, ncclDevResourceHandle) {
  return nullptr;
}
#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_CORE_H_ */
