// StreamOps over the CUDA runtime. Compiled only where torch_gyre is built
// with the CUDA runtime (GYRE_TORCH_CUDART); elsewhere cudaStreamOps() is
// nullptr and the backend refuses CUDA tensors.
#include "stream_ops.h"

#include <stdexcept>
#include <string>

#if defined(GYRE_TORCH_CUDART)
#include <cuda_runtime_api.h>
#endif

namespace torch_gyre::device {

#if defined(GYRE_TORCH_CUDART)
namespace {

void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  throw std::runtime_error(std::string("gyre backend: ") + call + " failed: " + cudaGetErrorName(e) + " (" +
                           cudaGetErrorString(e) + ")");
}

class CudaStreamOps final : public StreamOps {
 public:
  int currentDevice() override {
    int d = -1;
    check(cudaGetDevice(&d), "cudaGetDevice");
    return d;
  }
  void setDevice(int device) override { check(cudaSetDevice(device), "cudaSetDevice"); }
  Stream createStream() override {
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return s;
  }
  void destroyStream(Stream s) override { cudaStreamDestroy(s); }
  Event createEvent() override {
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }
  void destroyEvent(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  void record(Event e, Stream s) override { check(cudaEventRecord(static_cast<cudaEvent_t>(e), s), "cudaEventRecord"); }
  void streamWait(Stream s, Event e) override {
    check(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(e), 0), "cudaStreamWaitEvent");
  }
  bool query(Event e) override {
    cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) return false;
    check(r, "cudaEventQuery");
    return true;
  }
};

}  // namespace

StreamOps* cudaStreamOps() {
  static CudaStreamOps ops;
  return &ops;
}
#else
StreamOps* cudaStreamOps() { return nullptr; }
#endif

}  // namespace torch_gyre::device
