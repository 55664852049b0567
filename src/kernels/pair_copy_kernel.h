// Launching the point-to-point kernel (src/kernels/pair_copy_work.h) on a
// stream. Compiled by nvcc; called by the CUDA runtime adapter.
#pragma once

#include "include/gyre.h"
#include "src/kernels/pair_copy_work.h"

namespace gyre {

// The CUDA error code (0 on success).
int launchPairCopyKernel(const PairCopyWork& work, cudaStream_t stream);

}  // namespace gyre
