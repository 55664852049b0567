// The CUDA runtime services device communicators use, behind one interface:
// the real runtime (cuda_runtime.cc) or, with GYRE_FAKE_CUDA=1, the tests'
// fake (libgyre_fakecuda.so, tests/support/fake_cuda), which treats host
// memory as device memory and runs each stream's work in order through a
// device's hardware queues, as a driver does. The fake is how machines
// without a GPU test the device path's stream semantics; like the fake
// verbs provider for InfiniBand it is a
// library loaded at run time, never linked into gyre. Nothing here is on a
// per-element path.
#pragma once

#include <cstddef>

#include "include/gyre.h"
#include "src/kernels/device_work.h"
#include "src/kernels/direct_work.h"
#include "src/kernels/flag_work.h"
#include "src/kernels/pair_copy_work.h"

namespace gyre {

using StreamHandle = cudaStream_t;
using EventHandle = void*;

// cudaIpcMemHandle_t's size; the fake fills it with its own description.
struct IpcHandle {
  unsigned char bytes[64];
};

// Where a device pointer lives. CUDA carves small cudaMalloc allocations out
// of larger blocks, and CUDA IPC shares a whole block: a process that has
// one allocation of a block open cannot open another of it
// (cudaErrorAlreadyMapped) but addresses it through the first mapping.
struct AllocationInfo {
  void* base = nullptr;       // the cudaMalloc'd allocation holding the pointer
  size_t size = 0;
  uint64_t bufferId = 0;      // CU_POINTER_ATTRIBUTE_BUFFER_ID: never reused within the process
  void* blockBase = nullptr;  // the block CUDA IPC shares (CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR)
};

// cudaStreamCaptureMode: which captures under way forbid a thread the calls
// CUDA deems unsafe during capture (cudaMalloc, cudaEventQuery, ...).
enum class CaptureMode : int { Global = 0, ThreadLocal = 1, Relaxed = 2 };

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;
  virtual const char* name() const = 0;
  // The calling thread's current device; fails naming why none is usable.
  virtual ncclResult_t currentDevice(int* device) = 0;
  // Whether this process sees any device (quietly: no error is recorded).
  virtual bool hasDevice() = 0;
  virtual ncclResult_t setDevice(int device) = 0;
  // Whether `p` is device (or managed) memory the copy engines can reach.
  virtual ncclResult_t isDevicePointer(const void* p, bool* isDevice) = 0;
  // Device memory (ncclMemAlloc).
  virtual ncclResult_t deviceAlloc(size_t bytes, void** out) = 0;
  virtual ncclResult_t deviceFree(void* p) = 0;
  // Page-locked host memory, so device copies to it run asynchronously.
  virtual ncclResult_t allocHost(size_t bytes, void** out) = 0;
  virtual void freeHost(void* p) = 0;
  // Stream-ordered work. A host function must not call the runtime.
  virtual ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, StreamHandle stream) = 0;
  // `rows` rows of `width` bytes, each row starting a pitch further on.
  virtual ncclResult_t copy2DAsync(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width,
                                   size_t rows, StreamHandle stream) = 0;
  // A non-blocking stream on the current device (no implicit sync with the
  // legacy stream), for work the library spreads over streams of its own.
  virtual ncclResult_t streamCreate(StreamHandle* out) = 0;
  virtual void streamDestroy(StreamHandle stream) = 0;
  virtual ncclResult_t hostFunc(StreamHandle stream, void (*fn)(void*), void* arg) = 0;
  virtual ncclResult_t eventCreate(EventHandle* out) = 0;
  virtual void eventDestroy(EventHandle e) = 0;
  virtual ncclResult_t eventRecord(EventHandle e, StreamHandle stream) = 0;
  virtual ncclResult_t streamWaitEvent(StreamHandle stream, EventHandle e) = 0;
  // Whether the work recorded in `e` has completed.
  virtual ncclResult_t eventQuery(EventHandle e, bool* done) = 0;
  virtual ncclResult_t streamSynchronize(StreamHandle stream) = 0;
  // Whether the stream is being captured into a CUDA graph.
  virtual ncclResult_t isCapturing(StreamHandle stream, bool* capturing) = 0;

  // For the device executor (src/kernels/, src/transport/p2p).
  // Synchronous set-up copies and fills; legal while another stream captures.
  virtual ncclResult_t copySync(void* dst, const void* src, size_t bytes) = 0;
  virtual ncclResult_t memsetSync(void* dst, int value, size_t bytes) = 0;
  // Page-locked host memory the device also addresses (*device).
  virtual ncclResult_t allocMapped(size_t bytes, void** host, void** device) = 0;
  virtual void freeMapped(void* host) = 0;
  // Page-locks existing host memory and maps it for the device
  // (cudaHostRegister, mapped and portable): *device addresses it from
  // kernels and stream memory operations. A host store to such a word
  // reaches a stream waiting on it with no stream command, so it cannot
  // queue behind the wait it releases.
  virtual ncclResult_t registerHost(void* p, size_t bytes, void** device) = 0;
  virtual void unregisterHost(void* p) = 0;
  // Sharing deviceAlloc'd memory with another process (CUDA IPC). Opening a
  // handle made by this same process fails, as in CUDA, and so does opening
  // an allocation this process has open already (cudaErrorAlreadyMapped).
  virtual ncclResult_t ipcGetHandle(void* devicePtr, IpcHandle* out) = 0;
  // *out: the allocation's base as mapped here. *alreadyMapped (when given)
  // says the failure was cudaErrorAlreadyMapped; no error is recorded then.
  virtual ncclResult_t ipcOpenHandle(const IpcHandle& handle, void** out, bool* alreadyMapped = nullptr) = 0;
  virtual void ipcCloseHandle(void* p) = 0;
  // Whether kernels on `device` can read and write `peerDevice`'s memory.
  virtual bool canAccessPeer(int device, int peerDevice) = 0;
  // A device's PCI address as PeerInfo::busId packs it, and the ordinal this
  // process gives the device at such an address (false: not visible here).
  virtual ncclResult_t busIdOf(int device, int64_t* busId) = 0;
  virtual bool deviceAtBusId(int64_t busId, int* device) = 0;
  // Enqueues the collective kernel (the launch's blocks) on the stream.
  virtual ncclResult_t launchKernel(const DeviceLaunch& launch, StreamHandle stream) = 0;

  // For the direct executor (src/device/direct/direct_calls.h).
  // The allocation (cudaMalloc'd range) that holds `p`, its buffer id and block.
  virtual ncclResult_t allocationOf(const void* p, AllocationInfo* out) = 0;
  // Stream memory operations on a 32-bit flag in device memory: the stream
  // waits until (int32_t)(*flag - value) >= 0, or stores `value` — without a
  // kernel, so waits across processes sharing a GPU cost no SM time slices.
  virtual ncclResult_t streamWaitFlag(StreamHandle stream, const uint32_t* flag, uint32_t value) = 0;
  virtual ncclResult_t streamWriteFlag(StreamHandle stream, uint32_t* flag, uint32_t value) = 0;
  virtual ncclResult_t launchDirect(const DirectCall& call, StreamHandle stream) = 0;
  // The same waits and writes as streamWaitFlag/streamWriteFlag, run by a
  // one-thread kernel (src/kernels/flag_work.h says when that is needed).
  virtual ncclResult_t launchFlagOps(const FlagOps& ops, StreamHandle stream) = 0;
  // The point-to-point kernel (src/kernels/pair_copy_work.h).
  virtual ncclResult_t launchPairCopies(const PairCopyWork& work, StreamHandle stream) = 0;
  // Whether a call has failed with a sticky error (a kernel's illegal
  // address, say): the context then fails every call until the process ends.
  virtual bool contextBroken() = 0;

  // Stream capture.
  // cudaThreadExchangeStreamCaptureMode: the calling thread's mode becomes
  // *mode, and *mode the one it had (RelaxedCapture below scopes it).
  virtual ncclResult_t exchangeCaptureMode(CaptureMode* mode) = 0;

  // Tests only (GYRE_FAKE_CUDA=2): every collective call waits for its
  // streams before returning, so host-memory test programs, which read
  // results right after the call, run unchanged on device communicators.
  virtual bool synchronousForTests() const { return false; }

  // Peer access between devices of one process.
  // Lets kernels on `device` touch `peerDevice`'s memory
  // (cudaDeviceEnablePeerAccess, from `device`); success when it already
  // could. Without it a kernel touching the peer's memory faults with an
  // illegal address, which breaks the context (copies need no peer access).
  virtual ncclResult_t enablePeerAccess(int device, int peerDevice) = 0;
  // Stores values[i] to the device words dst[i], in order, on the current
  // device's private stream (stream memory writes), without waiting for
  // them: aborts and releases must return while a blocked stream holds the
  // hardware queue the private stream shares; the stores land once it moves.
  virtual ncclResult_t postWords(uint32_t* dst, const uint32_t* values, size_t n) = 0;
};

// GYRE_FAKE_CUDA=1 or 2: the fake, loaded from GYRE_FAKE_CUDA_LIB (default
// libgyre_fakecuda.so through the loader's search path, which finds a copy
// the process already has); else the CUDA runtime when this build has it;
// else nullptr (device communicators then refuse to initialise, saying why:
// whyNoDeviceRuntime()).
DeviceRuntime* deviceRuntime();
const char* whyNoDeviceRuntime();

DeviceRuntime* cudaDeviceRuntime();  // nullptr in a build without the CUDA runtime

// gyre's own CUDA calls while an application captures a graph. CUDA forbids
// "potentially unsafe" calls (cudaMalloc, cudaIpcOpenMemHandle,
// cudaEventQuery, synchronisation) to the capturing thread and, in the
// default Global mode, to every other thread while a Global capture is under
// way; a forbidden call fails and invalidates the application's capture.
// gyre's set-up work that a captured call may reach (first-use allocations,
// IPC opens) runs relaxed for its duration, and gyre's own threads
// (watchdogs, the staging worker) run relaxed for their whole life: none of
// that work is stream work a graph could record.
//
// The calling thread in cudaStreamCaptureModeRelaxed while this lives.
class RelaxedCapture {
 public:
  RelaxedCapture() {
    DeviceRuntime* rt = deviceRuntime();
    if (rt && rt->exchangeCaptureMode(&previous_) == ncclSuccess) runtime_ = rt;
  }
  ~RelaxedCapture() {
    if (runtime_) runtime_->exchangeCaptureMode(&previous_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  CaptureMode previous_ = CaptureMode::Relaxed;
  DeviceRuntime* runtime_ = nullptr;
};

// For a thread of gyre's own, first thing: it never captures, and its
// queries must not break an application thread's capture.
inline void relaxCaptureModeOfThisThread() {
  CaptureMode mode = CaptureMode::Relaxed;
  if (DeviceRuntime* rt = deviceRuntime()) rt->exchangeCaptureMode(&mode);
}

// What the fake library exports: one function, gyreFakeCudaRuntime, taking
// these options and returning its runtime (nullptr for another version).
constexpr int kFakeRuntimeVersion = 2;
struct FakeRuntimeOptions {
  int version = kFakeRuntimeVersion;
  int synchronous = 0;   // GYRE_FAKE_CUDA=2: synchronousForTests()
  int blockThreads = 1;  // GYRE_FAKE_BLOCK_THREADS
  // Records a failure of the fake as gyre's own (fail() of src/debug/error.h).
  ncclResult_t (*recordFailure)(ncclResult_t code, const char* text) = nullptr;
};
using FakeRuntimeEntry = DeviceRuntime* (*)(const FakeRuntimeOptions*);

}  // namespace gyre
