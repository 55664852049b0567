// Stand-in for the header torch's CMake build generates next to c10/cuda's
// headers and Debian's libtorch-dev omits. It only selects how c10_cuda's
// symbols are exported (C10_CUDA_BUILD_SHARED_LIBS), which does not matter
// to code that is compiled and never linked against c10_cuda here.
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
