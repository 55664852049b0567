// The CUDA facts a communicator needs at init, behind one small interface so
// builds without CUDA (and machines without a GPU) give clear errors.
#pragma once

#include "include/gyre.h"

namespace gyre {

// The calling thread's current CUDA device, or an error explaining why there
// is none (no CUDA in this build, no device visible, driver error).
ncclResult_t currentCudaDevice(int* device);

// Makes `device` the calling thread's current CUDA device.
ncclResult_t selectCudaDevice(int device);

// Lets this rank's kernels touch the memory of the ranks of its process on
// other GPUs of this host (cudaDeviceEnablePeerAccess), which the p2p FIFOs,
// captured point-to-point flags and windows address by raw pointers. A pair
// of GPUs without peer access is left alone: those paths then refuse it
// (canAccessPeer) and the calls stage through host memory.
ncclResult_t enablePeerAccessInProcess(const ncclComm* comm);

}  // namespace gyre
