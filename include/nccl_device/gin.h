/* nccl_device/gin.h — the names of NCCL's network device API (GIN: ncclGin,
 * ncclBarrierSession and their signal, counter and fence types), so that a
 * program whose kernels include a GIN variant beside its LSA ones (as
 * nccl-tests' do) still compiles against gyre.
 *
 * gyre has no GIN: ncclDevCommCreate refuses every requirement that needs it
 * (naming which), ncclCommQueryProperties reports ginType
 * NCCL_GIN_TYPE_NONE, and so no device communicator a kernel receives can
 * carry GIN resources. Programs check those before choosing a GIN kernel;
 * one that launches it anyway stops at its first GIN call (a trap), rather
 * than move nothing and report success. */
#ifndef GYRE_NCCL_DEVICE_GIN_H_
#define GYRE_NCCL_DEVICE_GIN_H_

#include "lsa_barrier.h"

#ifdef __cplusplus

namespace gyre_device {
[[noreturn]] GYRE_DEVICE_FN void noGin() {
#if defined(__CUDA_ARCH__)
  __trap();
  for (;;) {
  }
#else
  __builtin_trap();
#endif
}
[[noreturn]] GYRE_DEVICE_FN uint64_t noGinValue() { noGin(); }
}  // namespace gyre_device

/* How far a GIN barrier orders network writes. */
enum class ncclGinFenceLevel { Relaxed, Release, Acquire, AcqRel, SeqCst };

/* What a put or signal does at the peer when it lands. */
struct ncclGin_None {};
struct ncclGin_SignalInc {
  uint32_t signal;
};
struct ncclGin_SignalAdd {
  uint32_t signal;
  uint64_t value;
};
struct ncclGin_SignalSet {
  uint32_t signal;
  uint64_t value;
};
struct ncclGin_CounterInc {
  uint32_t counter;
};

/* A GIN context of a device communicator. Every operation traps: see the
 * file comment. */
struct ncclGin {
  GYRE_DEVICE_FN ncclGin(ncclDevComm const&, int) {}
  template <typename... Args>
  GYRE_DEVICE_FN void put(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void signal(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void get(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void flush(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN uint64_t readSignal(Args...) {
    return gyre_device::noGinValue();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void waitSignal(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void resetSignal(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN uint64_t readCounter(Args...) {
    return gyre_device::noGinValue();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void waitCounter(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void resetCounter(Args...) {
    gyre_device::noGin();
  }
};

/* A barrier over a team that may span the network (GIN). */
template <typename Coop>
struct ncclBarrierSession {
  template <typename... Args>
  GYRE_DEVICE_FN ncclBarrierSession(Coop, Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void arrive(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void wait(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void sync(Args...) {
    gyre_device::noGin();
  }
};

#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_GIN_H_ */
