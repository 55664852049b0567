#include "memory.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

#ifdef GYRE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "datatypes.h"

namespace gyre_bench {
namespace {

class HostMemory final : public BenchMemory {
 public:
  explicit HostMemory(bool shared) : shared_(shared) {}
  const char* kind() const override { return "host"; }
  ncclResult_t initComm(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank) override {
    return gyreCommInitRankHost(comm, nranks, id, rank, nullptr);
  }
  // Page-aligned and touched, so that first-touch page faults are not timed.
  void* alloc(size_t bytes) override {
    size_t rounded = (bytes + 4095) / 4096 * 4096;
    if (rounded == 0) rounded = 4096;
    void* p = nullptr;
    if (!shared_) p = std::aligned_alloc(4096, rounded);
    else if (gyreMemAllocHost(&p, rounded) != ncclSuccess) p = nullptr;
    if (p) std::memset(p, 0, rounded);
    return p;
  }
  void release(void* p) override {
    if (shared_) gyreMemFreeHost(p);
    else std::free(p);
  }
  bool upload(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
    return true;
  }
  bool download(void* host, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(host, src, bytes);
    return true;
  }
  cudaStream_t stream() const override { return nullptr; }
  void startTimer() override { start_ = std::chrono::steady_clock::now(); }
  double stopTimerUs() override {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start_).count();
  }
  bool synchronize() override { return true; }
  std::string lastError() const override { return ""; }

 private:
  bool shared_;
  std::chrono::steady_clock::time_point start_;
};

#ifdef GYRE_HAVE_CUDA
class DeviceMemory final : public BenchMemory {
 public:
  ~DeviceMemory() override {
    dropGraph();
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  bool init(int localRank, std::string* why) {
    int count = 0;
    if (!check(cudaGetDeviceCount(&count)) || count == 0) {
      *why = "no CUDA device (" + (count == 0 && error_.empty() ? std::string("0 devices") : error_) + ")";
      return false;
    }
    device_ = localRank % count;
    if (!check(cudaSetDevice(device_)) || !check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)) ||
        !check(cudaEventCreate(&start_)) || !check(cudaEventCreate(&stop_))) {
      *why = error_;
      return false;
    }
    return true;
  }
  const char* kind() const override { return "device"; }
  ncclResult_t initComm(ncclComm_t* comm, int nranks, const ncclUniqueId& id, int rank) override {
    return ncclCommInitRank(comm, nranks, id, rank);
  }
  void* alloc(size_t bytes) override {
    void* p = nullptr;
    if (!check(cudaMalloc(&p, bytes ? bytes : 1))) return nullptr;
    // On the benchmark's stream: a cudaMemset (legacy default stream) is not
    // ordered before uploads on this non-blocking stream, and could zero a
    // buffer after its data landed. The AllReduce that gathers the ranks'
    // times uploads into a fresh buffer, and on an H100 shared by processes
    // one rank's times came back 0 in several runs, which this race
    // explains.
    if (!check(cudaMemsetAsync(p, 0, bytes ? bytes : 1, stream_)) || !synchronize()) return nullptr;
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  // On the benchmark's own stream and waited for: cudaMemcpy from pageable
  // memory may return before the copy lands, and the collective's
  // non-blocking stream would not wait for it.
  bool upload(void* dst, const void* host, size_t bytes) override {
    return !bytes || (check(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_)) && synchronize());
  }
  bool download(void* host, const void* src, size_t bytes) override {
    return synchronize() && (!bytes || check(cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost)));
  }
  cudaStream_t stream() const override { return stream_; }
  // CUDA events by default; GYRE_BENCH_HOST_TIMER=1 times by the host clock
  // from the (synchronized) start to the stop event's completion, as
  // nccl-tests does: on an H100, ranks of different processes sharing the GPU
  // read 0 us from their events at some sizes, which halved the mean over
  // ranks.
  void startTimer() override {
    hostStart_ = std::chrono::steady_clock::now();
    check(cudaEventRecord(start_, stream_));
  }
  double stopTimerUs() override {
    float ms = 0;
    if (!check(cudaEventRecord(stop_, stream_)) || !check(cudaEventSynchronize(stop_)))
      return -1;
    if (hostTimer_)
      return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - hostStart_).count();
    if (!check(cudaEventElapsedTime(&ms, start_, stop_))) return -1;
    return ms * 1000.0;
  }
  bool synchronize() override { return check(cudaStreamSynchronize(stream_)); }
  bool beginCapture() override {
    dropGraph();
    // Global, as nccl-tests with one thread and PyTorch's torch.cuda.graph
    // capture: the strictest mode, which every thread of the library obeys too.
    return check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  }
  bool endCapture() override {
    return check(cudaStreamEndCapture(stream_, &graph_)) && check(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  bool launchGraph() override { return exec_ && check(cudaGraphLaunch(exec_, stream_)); }
  std::string lastError() const override { return error_; }

 private:
  bool check(cudaError_t err) {
    if (err == cudaSuccess) return true;
    error_ = cudaGetErrorString(err);
    return false;
  }

  void dropGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }

  int device_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  const bool hostTimer_ = [] {
    const char* v = std::getenv("GYRE_BENCH_HOST_TIMER");
    return v && std::strcmp(v, "1") == 0;
  }();
  std::chrono::steady_clock::time_point hostStart_;
  std::string error_;
};
#endif

}  // namespace

std::unique_ptr<BenchMemory> makeBenchMemory(bool device, bool sharedAlloc, int localRank, std::string* why) {
  if (!device) return std::make_unique<HostMemory>(sharedAlloc);
#ifdef GYRE_HAVE_CUDA
  auto memory = std::make_unique<DeviceMemory>();
  if (memory->init(localRank, why)) return memory;
  return nullptr;
#else
  (void)localRank;
  *why = "this build has no CUDA runtime (-G 1 needs one)";
  return nullptr;
#endif
}

ncclResult_t hostAllReduce(BenchMemory& memory, ncclComm_t comm, void* data, size_t count, ncclDataType_t type) {
  size_t bytes = count * typeSize(type);
  void* buf = memory.alloc(bytes);
  if (!buf) return ncclSystemError;
  ncclResult_t r = memory.upload(buf, data, bytes) ? ncclSuccess : ncclUnhandledCudaError;
  if (r == ncclSuccess) r = ncclAllReduce(buf, buf, count, type, ncclSum, comm, memory.stream());
  if (r == ncclSuccess && !memory.download(data, buf, bytes)) r = ncclUnhandledCudaError;
  memory.release(buf);
  return r;
}

}  // namespace gyre_bench
