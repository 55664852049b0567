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
[[noreturn]] GYRE_DEVICE_FN void noGin() { unavailable("GIN (network device operations)"); }
[[noreturn]] GYRE_DEVICE_FN uint64_t noGinValue() { noGin(); }
}  // namespace gyre_device

/* How far a GIN barrier orders network writes. */
/* How far a GIN barrier drains this rank's network operations: Relaxed
 * (NCCL 2.28's only level) and None order execution only; Put and Get
 * (combinable with |) wait for earlier puts or gets to settle. */
enum class ncclGinFenceLevel : uint32_t { None = 0, Relaxed = 0, Put = 1u << 0, Get = 1u << 1 };
GYRE_DEVICE_FN constexpr ncclGinFenceLevel operator|(ncclGinFenceLevel a, ncclGinFenceLevel b) {
  return ncclGinFenceLevel(uint32_t(a) | uint32_t(b));
}
GYRE_DEVICE_FN constexpr ncclGinFenceLevel operator&(ncclGinFenceLevel a, ncclGinFenceLevel b) {
  return ncclGinFenceLevel(uint32_t(a) & uint32_t(b));
}

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
  /* The shadow (locally expected) value of a signal, as credit-based
   * protocols keep it. */
  template <typename... Args>
  GYRE_DEVICE_FN uint64_t readSignalShadow(Args...) {
    return gyre_device::noGinValue();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void increaseSignalShadow(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void waitSignalMeetShadow(Args...) {
    gyre_device::noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void waitSignalFollowShadow(Args...) {
    gyre_device::noGin();
  }
};

namespace gyre_device {
/* A barrier whose every call traps: both of NCCL's network barriers need
   GIN, which no gyre device communicator carries. */
template <typename Coop>
struct NetworkBarrier {
  template <typename... Args>
  GYRE_DEVICE_FN NetworkBarrier(Coop, Args...) {
    noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void arrive(Args...) {
    noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void wait(Args...) {
    noGin();
  }
  template <typename... Args>
  GYRE_DEVICE_FN void sync(Args...) {
    noGin();
  }
};
}  // namespace gyre_device

/* A barrier over a team that may span the network (GIN). */
template <typename Coop>
struct ncclBarrierSession : gyre_device::NetworkBarrier<Coop> {
  using gyre_device::NetworkBarrier<Coop>::NetworkBarrier;
};

/* The network barrier of NCCL 2.30 on (ncclBarrierSession's GIN half). */
template <typename Coop>
struct ncclGinBarrierSession : gyre_device::NetworkBarrier<Coop> {
  using gyre_device::NetworkBarrier<Coop>::NetworkBarrier;
};

#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_GIN_H_ */
