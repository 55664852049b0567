#include "src/device/runtime/runtime.h"

#ifdef GYRE_HAVE_CUDA
#include <cuda_runtime.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include <cuda.h>

#include "src/kernels/collective_kernel.h"
#include "src/kernels/direct_kernel.h"
#include "src/kernels/flag_kernel.h"
#include "src/kernels/pair_copy_kernel.h"
#endif

#include "src/debug/error.h"

namespace gyre {

#ifdef GYRE_HAVE_CUDA
namespace {

std::atomic<bool> stickyErrorSeen{false};

static_assert(static_cast<int>(CaptureMode::Global) == cudaStreamCaptureModeGlobal &&
              static_cast<int>(CaptureMode::ThreadLocal) == cudaStreamCaptureModeThreadLocal &&
              static_cast<int>(CaptureMode::Relaxed) == cudaStreamCaptureModeRelaxed);

// The errors after which CUDA fails every call of the process (CUDA's
// documentation: "the process must be terminated and relaunched").
bool isSticky(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress: case cudaErrorLaunchFailure: case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress: case cudaErrorInvalidAddressSpace: case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError: case cudaErrorAssert: case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable: case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

ncclResult_t check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return ncclSuccess;
  if (isSticky(err)) stickyErrorSeen.store(true);
  return fail(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorString(err), cudaGetErrorName(err));
}

class CudaRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "cuda"; }

  ncclResult_t currentDevice(int* device) override {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      cudaGetLastError();  // clear the sticky error so later calls are not blamed
      return fail(ncclUnhandledCudaError,
                  "no CUDA device is usable (cudaGetDeviceCount: %s); for host memory use gyreCommInitRankHost",
                  err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    }
    return check(cudaGetDevice(device), "cudaGetDevice");
  }

  bool hasDevice() override {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess) return count > 0;
    cudaGetLastError();
    return false;
  }

  ncclResult_t setDevice(int device) override { return check(cudaSetDevice(device), "cudaSetDevice"); }

  ncclResult_t isDevicePointer(const void* p, bool* isDevice) override {
    // One driver attribute (the memory type) costs less than the runtime's
    // query of every attribute, and this runs twice in each collective call.
    // Managed memory may report either type, so "host" is asked again.
    if (loadDriverCalls() == ncclSuccess) {
      unsigned int type = 0;
      CUresult r = driver_.pointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                               reinterpret_cast<CUdeviceptr>(p));
      if (r == CUDA_ERROR_INVALID_VALUE) {  // not memory CUDA knows: plain host memory, or freed
        *isDevice = false;
        return ncclSuccess;
      }
      if (r == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE) {
        *isDevice = true;
        return ncclSuccess;
      }
    }
    cudaPointerAttributes attr{};
    cudaError_t err = cudaPointerGetAttributes(&attr, p);
    if (err != cudaSuccess) {
      cudaGetLastError();
      *isDevice = false;
      return ncclSuccess;
    }
    *isDevice = attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
    return ncclSuccess;
  }

  ncclResult_t deviceAlloc(size_t bytes, void** out) override { return check(cudaMalloc(out, bytes), "cudaMalloc"); }
  ncclResult_t deviceFree(void* p) override { return check(cudaFree(p), "cudaFree"); }
  ncclResult_t allocHost(size_t bytes, void** out) override {
    return check(cudaHostAlloc(out, bytes, cudaHostAllocPortable), "cudaHostAlloc");
  }
  void freeHost(void* p) override { cudaFreeHost(p); }

  ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, StreamHandle stream) override {
    return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync");
  }
  ncclResult_t copy2DAsync(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width, size_t rows,
                           StreamHandle stream) override {
    return check(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, rows, cudaMemcpyDefault, stream),
                 "cudaMemcpy2DAsync");
  }
  ncclResult_t streamCreate(StreamHandle* out) override {
    return check(cudaStreamCreateWithFlags(out, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  void streamDestroy(StreamHandle stream) override { cudaStreamDestroy(stream); }
  ncclResult_t hostFunc(StreamHandle stream, void (*fn)(void*), void* arg) override {
    return check(cudaLaunchHostFunc(stream, fn, arg), "cudaLaunchHostFunc");
  }
  ncclResult_t eventCreate(EventHandle* out) override {
    cudaEvent_t e = nullptr;
    GYRE_CHECK(check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
    *out = e;
    return ncclSuccess;
  }
  void eventDestroy(EventHandle e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  ncclResult_t eventRecord(EventHandle e, StreamHandle stream) override {
    return check(cudaEventRecord(static_cast<cudaEvent_t>(e), stream), "cudaEventRecord");
  }
  ncclResult_t streamWaitEvent(StreamHandle stream, EventHandle e) override {
    return check(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(e), 0), "cudaStreamWaitEvent");
  }
  ncclResult_t eventQuery(EventHandle e, bool* done) override {
    cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(e));
    *done = err == cudaSuccess;
    if (err == cudaErrorNotReady) {
      cudaGetLastError();  // "not ready" is left as the thread's last error; it is no failure
      return ncclSuccess;
    }
    return check(err, "cudaEventQuery");
  }
  ncclResult_t streamSynchronize(StreamHandle stream) override {
    return check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  ncclResult_t isCapturing(StreamHandle stream, bool* capturing) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    GYRE_CHECK(check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing"));
    *capturing = status != cudaStreamCaptureStatusNone;
    return ncclSuccess;
  }

  // Set-up work may run while the application captures a graph on another
  // stream: relaxed mode keeps such calls from invalidating that capture.
  // It goes on a private non-blocking stream: cudaMemcpy on the legacy
  // stream would wait for every blocking stream, including one whose kernel
  // waits for a peer this thread has yet to launch (a group over two
  // communicators of one process).
  ncclResult_t copySync(void* dst, const void* src, size_t bytes) override {
    RelaxedCapture relaxed;
    cudaStream_t s = nullptr;
    GYRE_CHECK(privateStream(&s));
    GYRE_CHECK(check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync"));
    return check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  ncclResult_t memsetSync(void* dst, int value, size_t bytes) override {
    RelaxedCapture relaxed;
    cudaStream_t s = nullptr;
    GYRE_CHECK(privateStream(&s));
    GYRE_CHECK(check(cudaMemsetAsync(dst, value, bytes, s), "cudaMemsetAsync"));
    return check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  }
  ncclResult_t allocMapped(size_t bytes, void** host, void** device) override {
    RelaxedCapture relaxed;
    GYRE_CHECK(check(cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable), "cudaHostAlloc"));
    memset(*host, 0, bytes);
    ncclResult_t r = check(cudaHostGetDevicePointer(device, *host, 0), "cudaHostGetDevicePointer");
    if (r != ncclSuccess) cudaFreeHost(*host);
    return r;
  }
  void freeMapped(void* host) override {
    RelaxedCapture relaxed;  // as allocMapped
    cudaFreeHost(host);
  }
  ncclResult_t registerHost(void* p, size_t bytes, void** device) override {
    RelaxedCapture relaxed;  // set-up, as allocMapped
    GYRE_CHECK(check(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                     "cudaHostRegister"));
    ncclResult_t r = check(cudaHostGetDevicePointer(device, p, 0), "cudaHostGetDevicePointer");
    if (r != ncclSuccess) cudaHostUnregister(p);
    return r;
  }
  void unregisterHost(void* p) override {
    RelaxedCapture relaxed;
    cudaHostUnregister(p);
  }
  ncclResult_t ipcGetHandle(void* devicePtr, IpcHandle* out) override {
    static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle));
    cudaIpcMemHandle_t h;
    cudaError_t err = cudaIpcGetMemHandle(&h, devicePtr);
    if (err != cudaSuccess && !isSticky(err)) cudaGetLastError();  // memory IPC cannot share (cudaMallocAsync)
    GYRE_CHECK(check(err, "cudaIpcGetMemHandle"));
    memcpy(out->bytes, &h, sizeof(h));
    return ncclSuccess;
  }
  ncclResult_t ipcOpenHandle(const IpcHandle& handle, void** out, bool* alreadyMapped) override {
    cudaIpcMemHandle_t h;
    memcpy(&h, handle.bytes, sizeof(h));
    cudaError_t err = cudaIpcOpenMemHandle(out, h, cudaIpcMemLazyEnablePeerAccess);
    if (alreadyMapped) *alreadyMapped = err == cudaErrorAlreadyMapped;
    if (err == cudaErrorAlreadyMapped) {
      cudaGetLastError();  // not sticky, and the caller knows what to do
      if (alreadyMapped) return ncclUnhandledCudaError;
    }
    return check(err, "cudaIpcOpenMemHandle");
  }
  void ipcCloseHandle(void* p) override { cudaIpcCloseMemHandle(p); }
  bool canAccessPeer(int device, int peerDevice) override {
    if (device == peerDevice) return true;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, device, peerDevice) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return can != 0;
  }
  ncclResult_t busIdOf(int device, int64_t* busId) override {
    int domain = 0, bus = 0, dev = 0;
    GYRE_CHECK(check(cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, device), "cudaDeviceGetAttribute"));
    GYRE_CHECK(check(cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, device), "cudaDeviceGetAttribute"));
    GYRE_CHECK(check(cudaDeviceGetAttribute(&dev, cudaDevAttrPciDeviceId, device), "cudaDeviceGetAttribute"));
    *busId = (static_cast<int64_t>(domain) << 32) | (static_cast<int64_t>(bus) << 16) | (dev << 8);
    return ncclSuccess;
  }
  bool deviceAtBusId(int64_t busId, int* device) override {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    for (int d = 0; d < count; ++d) {
      int64_t id = -1;
      if (busIdOf(d, &id) == ncclSuccess && id == busId) {
        *device = d;
        return true;
      }
    }
    return false;
  }
  bool contextBroken() override { return stickyErrorSeen.load(); }
  ncclResult_t exchangeCaptureMode(CaptureMode* mode) override {
    auto m = static_cast<cudaStreamCaptureMode>(*mode);
    GYRE_CHECK(check(cudaThreadExchangeStreamCaptureMode(&m), "cudaThreadExchangeStreamCaptureMode"));
    *mode = static_cast<CaptureMode>(m);
    return ncclSuccess;
  }

  ncclResult_t enablePeerAccess(int device, int peerDevice) override {
    if (device == peerDevice) return ncclSuccess;
    int previous = 0;
    GYRE_CHECK(check(cudaGetDevice(&previous), "cudaGetDevice"));
    if (previous != device) GYRE_CHECK(check(cudaSetDevice(device), "cudaSetDevice"));
    cudaError_t err = cudaDeviceEnablePeerAccess(peerDevice, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // another communicator of this process enabled it: what was wanted
      err = cudaSuccess;
    }
    if (previous != device) cudaSetDevice(previous);
    if (err == cudaSuccess) return ncclSuccess;
    if (isSticky(err)) stickyErrorSeen.store(true);
    else cudaGetLastError();
    return fail(ncclUnhandledCudaError, "cudaDeviceEnablePeerAccess from device %d to device %d failed: %s (%s)",
                device, peerDevice, cudaGetErrorString(err), cudaGetErrorName(err));
  }
  ncclResult_t postWords(uint32_t* dst, const uint32_t* values, size_t n) override {
    RelaxedCapture relaxed;
    cudaStream_t s = nullptr;
    GYRE_CHECK(privateStream(&s));
    for (size_t i = 0; i < n; ++i) GYRE_CHECK(streamWriteFlag(s, dst + i, values[i]));
    return ncclSuccess;
  }

  ncclResult_t allocationOf(const void* p, AllocationInfo* out) override {
    GYRE_CHECK(loadDriverCalls());
    const CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(p);
    CUdeviceptr b = 0;
    CUresult r = driver_.memGetAddressRange(&b, &out->size, ptr);
    if (r != CUDA_SUCCESS) return driverFailure(r, "cuMemGetAddressRange");
    out->base = reinterpret_cast<void*>(b);
    unsigned long long id = 0;
    r = driver_.pointerGetAttribute(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, ptr);
    if (r != CUDA_SUCCESS) return driverFailure(r, "cuPointerGetAttribute(BUFFER_ID)");
    out->bufferId = id;
    void* block = nullptr;
    r = driver_.pointerGetAttribute(&block, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, ptr);
    if (r != CUDA_SUCCESS) return driverFailure(r, "cuPointerGetAttribute(MAPPING_BASE_ADDR)");
    out->blockBase = block;
    return ncclSuccess;
  }
  ncclResult_t streamWaitFlag(StreamHandle stream, const uint32_t* flag, uint32_t value) override {
    GYRE_CHECK(loadDriverCalls());
    CUresult r = driver_.waitValue32(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag), value,
                                     CU_STREAM_WAIT_VALUE_GEQ);
    return r == CUDA_SUCCESS ? ncclSuccess : driverFailure(r, "cuStreamWaitValue32");
  }
  ncclResult_t streamWriteFlag(StreamHandle stream, uint32_t* flag, uint32_t value) override {
    GYRE_CHECK(loadDriverCalls());
    CUresult r = driver_.writeValue32(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(flag), value,
                                      CU_STREAM_WRITE_VALUE_DEFAULT);
    return r == CUDA_SUCCESS ? ncclSuccess : driverFailure(r, "cuStreamWriteValue32");
  }
  ncclResult_t launchDirect(const DirectCall& call, StreamHandle stream) override {
    int err = launchDirectKernel(call, stream);
    if (err < 0) return fail(ncclInvalidArgument, "no direct kernel for datatype %d with op %d", call.datatype,
                             call.redop);
    return check(static_cast<cudaError_t>(err), "direct kernel launch");
  }
  ncclResult_t launchFlagOps(const FlagOps& ops, StreamHandle stream) override {
    return check(static_cast<cudaError_t>(launchFlagKernel(ops, stream)), "flag kernel launch");
  }
  ncclResult_t launchPairCopies(const PairCopyWork& work, StreamHandle stream) override {
    return check(static_cast<cudaError_t>(launchPairCopyKernel(work, stream)), "point-to-point kernel launch");
  }
  ncclResult_t launchKernel(const DeviceLaunch& launch, StreamHandle stream) override {
    int err = launchCollectiveKernel(launch, stream);
    if (err < 0) return fail(ncclInvalidArgument, "no collective kernel for datatype %d with op %d",
                             launch.calls[0].datatype, launch.calls[0].redop);
    return check(static_cast<cudaError_t>(err), "collective kernel launch");
  }

 private:
  // One per device, created on first use and kept for the process's life.
  ncclResult_t privateStream(cudaStream_t* out) {
    int device = 0;
    GYRE_CHECK(check(cudaGetDevice(&device), "cudaGetDevice"));
    std::lock_guard<std::mutex> lock(mutex_);
    cudaStream_t& s = privateStreams_[device];
    if (!s) GYRE_CHECK(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
    *out = s;
    return ncclSuccess;
  }

  std::mutex mutex_;
  std::map<int, cudaStream_t> privateStreams_;

  // Driver calls the runtime API lacks, found through the runtime (so
  // libgyre needs no link against libcuda, which machines without a GPU lack).
  struct DriverCalls {
    CUresult (*memGetAddressRange)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
    CUresult (*pointerGetAttribute)(void*, CUpointer_attribute, CUdeviceptr) = nullptr;
    CUresult (*waitValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
    CUresult (*writeValue32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
  } driver_;
  std::atomic<bool> driverLoaded_{false};

  ncclResult_t loadDriverCalls() {
    if (driverLoaded_.load(std::memory_order_acquire)) return ncclSuccess;
    std::lock_guard<std::mutex> lock(mutex_);
    if (driverLoaded_.load(std::memory_order_relaxed)) return ncclSuccess;
    auto find = [](const char* name, void** fn) {
      cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
      cudaError_t err = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &found);
      if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || !*fn)
        return fail(ncclUnhandledCudaError, "the CUDA driver does not provide %s (%s)", name,
                    err != cudaSuccess ? cudaGetErrorString(err) : "symbol not found");
      return ncclSuccess;
    };
    GYRE_CHECK(find("cuMemGetAddressRange", reinterpret_cast<void**>(&driver_.memGetAddressRange)));
    GYRE_CHECK(find("cuPointerGetAttribute", reinterpret_cast<void**>(&driver_.pointerGetAttribute)));
    GYRE_CHECK(find("cuStreamWaitValue32", reinterpret_cast<void**>(&driver_.waitValue32)));
    GYRE_CHECK(find("cuStreamWriteValue32", reinterpret_cast<void**>(&driver_.writeValue32)));
    driverLoaded_.store(true, std::memory_order_release);
    return ncclSuccess;
  }
  static ncclResult_t driverFailure(CUresult r, const char* what) {
    return fail(ncclUnhandledCudaError, "%s failed: CUDA driver error %d", what, static_cast<int>(r));
  }

  struct RelaxedCapture {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
    ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
  };
};

}  // namespace

DeviceRuntime* cudaDeviceRuntime() {
  static CudaRuntime runtime;
  return &runtime;
}
#else
DeviceRuntime* cudaDeviceRuntime() { return nullptr; }
#endif

}  // namespace gyre
