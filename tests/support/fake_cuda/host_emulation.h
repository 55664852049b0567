// The collective kernel run on host threads: each block's lanes
// (src/kernels/lane_loop.h) on one or more host threads. The fake CUDA
// runtime launches this in place of the kernel, so CI without a GPU runs the
// device executor's step loop, FIFO protocol and error reporting.
#pragma once

#include "include/gyre.h"
#include "src/kernels/device_work.h"
#include "src/kernels/direct_work.h"
#include "src/kernels/flag_work.h"
#include "src/kernels/pair_copy_work.h"

namespace gyre {

// Runs every block of `launch` to the end, `threadsPerBlock` host threads
// per block (more than one exercises the loop's barriers and how it shares
// a step among a block's threads); errors land in the calls' status as on
// the device. Fails only for an unsupported type/op.
ncclResult_t runLaunchOnHostThreads(const DeviceLaunch& launch, int threadsPerBlock);

// The direct executor's kernel (src/kernels/direct_work.h) on the calling thread.
ncclResult_t runDirectOnHost(const DirectCall& call);

// The flag kernel (src/kernels/flag_work.h) on the calling thread.
void runFlagOpsOnHost(const FlagOps& ops);

// The point-to-point kernel (src/kernels/pair_copy_work.h), as one block, on the
// calling thread.
void runPairCopiesOnHost(const PairCopyWork& work);

}  // namespace gyre
