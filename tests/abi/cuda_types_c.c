/* nccl.h and nccl_device.h from C, without the CUDA headers: the types and
 * initializers a C program uses compile, and their sizes are NCCL's. */
#include <nccl.h>
#include <nccl_device.h>
#include <stddef.h>
#include <stdio.h>

int main(void) {
  cudaStream_t s = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclCollConfig_t coll = NCCL_COLLCONFIG_INITIALIZER;
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  int ok = s == NULL && config.size == 120 && sizeof(ncclConfig_t) == 120 && coll.size == 64 &&
           sizeof(reqs) == 88 && sizeof(ncclCommProperties_t) == 56 && sizeof(ncclTeam_t) == 12 &&
           sizeof(ncclTeamRequirements_t) == 32 && sizeof(ncclDevResourceRequirements_t) == 56;
  /* ncclDevComm's leading fields, the ones kernels read, sit where NCCL's do. */
  ok = ok && offsetof(ncclDevComm_t, rank) == 8 && offsetof(ncclDevComm_t, nRanks) == 12 &&
       offsetof(ncclDevComm_t, nRanks_rcp32) == 16 && offsetof(ncclDevComm_t, lsaRank) == 20 &&
       offsetof(ncclDevComm_t, lsaSize) == 24 && offsetof(ncclDevComm_t, lsaSize_rcp32) == 28 &&
       offsetof(ncclDevComm_t, windowTable) == 32 && offsetof(ncclDevComm_t, resourceWindow) == 40 &&
       sizeof(ncclLsaBarrierHandle_t) == 8 && sizeof(ncclMultimemHandle_t) == sizeof(void*);
  printf("%s\n", ok ? "PASSED" : "FAILED: a size or offset differs from NCCL's");
  return ok ? 0 : 1;
}
