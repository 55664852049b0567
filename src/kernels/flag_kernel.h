// Launching the flag kernel (src/kernels/flag_work.h) on a stream. Compiled by
// nvcc; called by the CUDA runtime adapter.
#pragma once

#include "include/gyre.h"
#include "src/kernels/flag_work.h"

namespace gyre {

// The CUDA error code (0 on success).
int launchFlagKernel(const FlagOps& ops, cudaStream_t stream);

}  // namespace gyre
