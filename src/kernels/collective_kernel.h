// Launching the collective kernel (src/kernels/collective_kernel.cu): the
// launch's blocks, on `stream`. Compiled by nvcc; called by the CUDA
// runtime adapter (src/device/runtime/cuda_runtime.cc).
#pragma once

#include "include/gyre.h"
#include "src/kernels/device_work.h"

namespace gyre {

// Threads per block: warps moving 16-byte vectors over each step's elements.
constexpr int kKernelThreads = 512;

// Returns the CUDA error code (0 on success; the caller turns it into text),
// or -1 when the calls' type/op has no kernel.
int launchCollectiveKernel(const DeviceLaunch& launch, cudaStream_t stream);

}  // namespace gyre
