#include "src/device/runtime.h"

#ifdef GYRE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "src/debug/error.h"

namespace gyre {

#ifdef GYRE_HAVE_CUDA
namespace {

ncclResult_t check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return ncclSuccess;
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

  ncclResult_t setDevice(int device) override { return check(cudaSetDevice(device), "cudaSetDevice"); }

  ncclResult_t isDevicePointer(const void* p, bool* isDevice) override {
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
  ncclResult_t streamSynchronize(StreamHandle stream) override {
    return check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }
  ncclResult_t isCapturing(StreamHandle stream, bool* capturing) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    GYRE_CHECK(check(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing"));
    *capturing = status != cudaStreamCaptureStatusNone;
    return ncclSuccess;
  }
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
