// The kernels run on host threads from their shared source: the collective
// kernel's lanes (src/kernels/lane_loop.h), the flag kernel's operations and
// the point-to-point kernel's blocks. The fake CUDA runtime launches these in
// place of the kernels, so CI without a GPU runs the device executor's step
// loop, FIFO protocol and error reporting, and the flags' counting.
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

// The flag kernel (src/kernels/flag_loop.h) on the calling thread.
void runFlagOpsOnHost(const FlagOps& ops);

// The point-to-point kernel (src/kernels/pair_copy_loop.h): `blocks` blocks of
// `threadsPerBlock` host threads each, all running at once, so the blocks'
// arrival count and the grid-stride copy run as on the device.
void runPairCopiesOnHost(const PairCopyWork& work, int blocks, int threadsPerBlock);

}  // namespace gyre
