// Words a kernel reads or writes while another agent uses them: the host's
// abort words, the peers-gone table, the status block's error, a timeout
// report the host polls. On the device these are volatile accesses, ordered
// by the fences around them. The tests' fake CUDA runtime runs the kernels'
// source on host threads, where a plain (volatile) access racing another
// thread's is a data race in C++'s model, which ThreadSanitizer reports: there
// they are atomic, acquire loads and release stores, which order what the
// device's fences order (the host's notice written before its abort word, a
// kernel's report before the word the host polls).
#pragma once

#include <cstdint>

#include "src/kernels/primitives/host_device.h"

namespace gyre {

template <typename T>
GYRE_HOST_DEVICE T loadSharedWord(const volatile T* p) {
#if defined(__CUDA_ARCH__)
  return *p;
#else
  return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

template <typename T>
GYRE_HOST_DEVICE void storeSharedWord(volatile T* p, T value) {
#if defined(__CUDA_ARCH__)
  *p = value;
#else
  __atomic_store_n(p, value, __ATOMIC_RELEASE);
#endif
}

}  // namespace gyre
