/* nccl_device.h — the host side of NCCL's device-side API: the types and
 * initializers a program needs to ask for a device communicator
 * (ncclDevCommCreate) and to query what the communicator supports
 * (ncclCommQueryProperties). Layouts are NCCL's, so such a program compiles
 * and links against gyre unchanged; gyre itself has no device-side API, so
 * ncclDevCommCreate refuses (ncclInvalidUsage) and ncclCommQueryProperties
 * reports deviceApiSupport = false. The device functions (barriers, GIN,
 * ncclGet*Pointer on the device) and the contents of ncclDevComm are not
 * provided: ncclDevComm is declared, not defined. */
#ifndef GYRE_NCCL_DEVICE_H_
#define GYRE_NCCL_DEVICE_H_

#include "nccl.h"

#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclDevComm ncclDevComm_t;

struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

typedef struct ncclWindow_vidmem ncclWindow_vidmem_t;

struct ncclMultimemHandle;
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

struct ncclLsaBarrierHandle;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
struct ncclGinBarrierHandle;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
struct ncclLLA2AHandle;
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
 * communicator should reserve. */
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
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

#ifdef __cplusplus
} /* extern "C" */

/* The tags device code names teams by (the world, the load-store-accessible
 * ranks, the rail). */
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};
#endif

#endif /* GYRE_NCCL_DEVICE_H_ */
