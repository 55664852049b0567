// Marks functions that both executors share: the host executor compiles them
// as ordinary inline C++, nvcc compiles them for the device as well.
#pragma once

#if defined(__CUDACC__)
#define GYRE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GYRE_HOST_DEVICE inline
#endif
