#include "src/comm/cuda_device.h"

#include "src/debug/error.h"

#ifdef GYRE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace gyre {

ncclResult_t currentCudaDevice(int* device) {
#ifdef GYRE_HAVE_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0)
    return fail(ncclUnhandledCudaError,
                "no CUDA device is usable (cudaGetDeviceCount: %s); for host memory use gyreCommInitRankHost",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
  err = cudaGetDevice(device);
  if (err != cudaSuccess) return fail(ncclUnhandledCudaError, "cudaGetDevice failed: %s", cudaGetErrorString(err));
  return ncclSuccess;
#else
  *device = -1;
  return fail(ncclInvalidUsage,
              "this gyre build has no CUDA support; for host memory use gyreCommInitRankHost");
#endif
}

ncclResult_t selectCudaDevice(int device) {
#ifdef GYRE_HAVE_CUDA
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess)
    return fail(ncclUnhandledCudaError, "cudaSetDevice(%d) failed: %s; for host memory use gyreCommInitAllHost", device,
                cudaGetErrorString(err));
  return ncclSuccess;
#else
  return fail(ncclInvalidUsage, "this gyre build has no CUDA support (device %d); for host memory use "
                                "gyreCommInitAllHost", device);
#endif
}

}  // namespace gyre
