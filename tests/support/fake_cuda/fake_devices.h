// The fake CUDA runtime's devices: which fake device owns each piece of fake
// device memory, and which devices may reach which. A driver maps one
// device's memory into another device's address space only once
// cudaDeviceEnablePeerAccess was called from the second device (or, for a
// CUDA IPC mapping opened with cudaIpcMemLazyEnablePeerAccess, for that
// mapping); a kernel or stream memory operation that touches memory of a
// device it cannot reach faults with an illegal address, which is sticky.
// Copies need no peer access (the driver stages them), so they are not
// checked.
//
// A driver's other multi-device rules the fake holds gyre to (CUDA's "Stream
// and Event Behavior"): an event and a stream belong to the device current
// when they are made; a kernel launches only into a stream of the current
// device, and an event records only into a stream of its own device (both
// fail with cudaErrorInvalidResourceHandle, which is not sticky); copies,
// cudaStreamWaitEvent, cudaEventQuery and cudaStreamSynchronize work on any
// device's streams and events.
//
// Memory the fake never allocated (tests pass std::vector storage as device
// buffers, and mapped host memory is host memory) belongs to no device and
// every device reaches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "tests/support/fake_cuda/fake_cuda.h"

namespace gyre {

// What tests may call. The devices with a primary context in this process,
// one bit each (bit d: device d): cudaSetDevice(d) makes d's, and every
// other call but cudaGetDevice and the device queries makes the current
// device's, which is device 0 on a thread that never set one. A process
// that drives one GPU should show that GPU's bit alone.
GYRE_FAKE_CUDA_API uint32_t fakeContextDevices();
// Whether distinct fake devices support peer access
// (cudaDeviceCanAccessPeer; they do unless a test says otherwise).
GYRE_FAKE_CUDA_API void fakeSetPeerAccessSupported(bool supported);
// Whether distinct fake devices have native peer atomics (NVLink: yes, the
// default; a PCIe pair: no, cudaDevP2PAttrNativeAtomicSupported 0). Without
// them the point-to-point kernel's atomic add on another device's memory
// faults, breaking the context, where on a GPU it would not be atomic.
GYRE_FAKE_CUDA_API void fakeSetPeerAtomicsSupported(bool supported);
// The fake device owning `p` (deviceAlloc'd or IPC-mapped memory), or -1.
GYRE_FAKE_CUDA_API int fakeDeviceOf(const void* p);
// A test's emulated kernel on the calling thread's current device touches
// `p`: false, with the context broken as the driver's fault leaves it, when
// that device cannot reach `p`.
GYRE_FAKE_CUDA_API bool fakeKernelTouch(const void* p);

struct DeviceLaunch;
struct DirectCall;
struct FlagOps;
struct PairCopyWork;

class FakeDevices {
 public:
  static constexpr int kCount = 8;

  // `device` owns [base, base + size); `mappedBy` >= 0: a CUDA IPC mapping
  // opened on that device, which reaches it whatever the peer access.
  void own(const void* base, size_t size, int device, int mappedBy = -1);
  void disown(const void* base);
  // The device owning `p`, or -1.
  int ownerOf(const void* p);

  enum class Enable { kDone, kAlreadyEnabled, kInvalidDevice, kSameDevice };
  // cudaDeviceEnablePeerAccess(peer) on `device`.
  Enable enablePeerAccess(int device, int peer);

  // Empty when a kernel on `device` may touch `p`; else why not, in the
  // driver's words plus the fake's diagnosis.
  std::string unreachable(int device, const volatile void* pointer, const char* what);

  // The same for every pointer a launch's kernel dereferences.
  std::string unreachable(int device, const DeviceLaunch& launch);
  std::string unreachable(int device, const DirectCall& call);
  std::string unreachable(int device, const FlagOps& ops);
  std::string unreachable(int device, const PairCopyWork& work);

 private:
  struct Owned {
    size_t size;
    int device;
    int mappedBy;
  };
  std::mutex mutex_;
  std::map<const void*, Owned> owned_;  // by base address
  bool peer_[kCount][kCount] = {};      // peer_[d][p]: kernels on d reach p's memory
};

}  // namespace gyre
