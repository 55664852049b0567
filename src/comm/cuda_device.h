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

}  // namespace gyre
