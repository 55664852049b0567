// Launching the direct executor's kernel (src/kernels/direct_kernel.cu) on a
// stream. Compiled by nvcc; called by the CUDA runtime adapter.
#pragma once

#include "include/gyre.h"
#include "src/kernels/direct_work.h"

namespace gyre {

// The CUDA error code (0 on success), or -1 when the type/op has no kernel.
int launchDirectKernel(const DirectCall& call, cudaStream_t stream);

}  // namespace gyre
