/* A program written for NCCL that relies on what nccl.h brings in: with the
 * CUDA headers on the include path (nvcc, or g++ -I<cuda>/include) it uses
 * half, __nv_bfloat16 and the CUDA runtime's cudaStream_t without including
 * them itself; without them (plain g++) it uses only cudaStream_t, which
 * nccl.h then declares. Returns 0 when every check holds. */
#include <nccl.h>
#include <nccl_device.h>

#include <stdio.h>

static int failures = 0;
#define CHECK(cond)                                           \
  do {                                                        \
    if (!(cond)) {                                            \
      fprintf(stderr, "FAIL line %d: %s\n", __LINE__, #cond); \
      ++failures;                                             \
    }                                                         \
  } while (0)

int main() {
#ifdef EXPECT_CUDA_TYPES
  CHECK(CUDART_VERSION >= 11000);
  half h = __float2half(1.5f);
  __nv_bfloat16 b = __float2bfloat16(2.5f);
  CHECK(__half2float(h) == 1.5f);
  CHECK(__bfloat162float(b) == 2.5f);
  CHECK(sizeof(h) == 2 && sizeof(b) == 2);
#if defined(__CUDA_FP8_TYPES_EXIST__)
  __nv_fp8_e4m3 f8(3.0f);
  CHECK(float(f8) == 3.0f);
#endif
  cudaStream_t s = nullptr;
  CHECK(cudaStreamDestroy != nullptr);  // the runtime's declarations are there
#else
#ifdef CUDART_VERSION
#error "the CUDA runtime header was included although EXPECT_CUDA_TYPES is not set"
#endif
  cudaStream_t s = nullptr;
#endif
  CHECK(s == nullptr);
  int version = 0;
  CHECK(ncclGetVersion(&version) == ncclSuccess && version == NCCL_VERSION_CODE);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclCollConfig_t coll = NCCL_COLLCONFIG_INITIALIZER;
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  CHECK(config.size == sizeof(ncclConfig_t) && coll.forceAlgSelection == 1);
  CHECK(reqs.ginContextCount == 4 && props.magic == NCCL_API_MAGIC);
  ncclTeam_t team = {4, 1, 1};
  CHECK(team.nRanks == 4);
  printf("%s: %d failures\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
