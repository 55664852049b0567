// nccl_abi_bw: one rank's AllReduce (float sum) through whichever
// libnccl.so.2 it is given, found with dlopen, so the same binary times
// NVIDIA's NCCL and gyre's drop-in library side by side (NCCL refuses two
// ranks on one GPU, so one rank is where the two meet on one GPU). Beside
// each size it times a device-to-device cudaMemcpyAsync of the same bytes,
// the bound an out-of-place one-rank AllReduce can reach.
//
//   nccl_abi_bw LIBNCCL [MIN_BYTES=8] [MAX_BYTES=1073741824]
//
// Columns: size, out-of-place time and algbw, in-place time, copy time and
// algbw, and the number of wrong elements of the out-of-place result.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/cuda_ok.h"
#include "nccl.h"

namespace {

struct Nccl {
  decltype(&ncclGetVersion) getVersion;
  decltype(&ncclCommInitAll) initAll;
  decltype(&ncclAllReduce) allReduce;
  decltype(&ncclCommDestroy) destroy;
  decltype(&ncclGetErrorString) errorString;
};

template <typename Fn>
void resolve(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!*fn) {
    std::fprintf(stderr, "nccl_abi_bw: %s not found: %s\n", name, dlerror());
    std::exit(2);
  }
}

// Mean microseconds per call of `run` over `iters` calls after `warmup`.
template <typename Run>
double timeUs(cudaStream_t stream, int warmup, int iters, Run run) {
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  for (int i = 0; i < warmup; ++i) run();
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaEventRecord(start, stream));
  for (int i = 0; i < iters; ++i) run();
  CUDA_OK(cudaEventRecord(stop, stream));
  CUDA_OK(cudaEventSynchronize(stop));
  float ms = 0;
  CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1000.0 / iters;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nccl_abi_bw LIBNCCL [MIN_BYTES] [MAX_BYTES]\n");
    return 2;
  }
  const size_t minBytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 8;
  const size_t maxBytes = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : size_t(1) << 30;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "nccl_abi_bw: %s\n", dlerror());
    return 2;
  }
  Nccl nccl;
  resolve(lib, "ncclGetVersion", &nccl.getVersion);
  resolve(lib, "ncclCommInitAll", &nccl.initAll);
  resolve(lib, "ncclAllReduce", &nccl.allReduce);
  resolve(lib, "ncclCommDestroy", &nccl.destroy);
  resolve(lib, "ncclGetErrorString", &nccl.errorString);
  int version = 0;
  nccl.getVersion(&version);
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(nccl.allReduce), &info);
  std::printf("# library %s (version code %d)\n", info.dli_fname ? info.dli_fname : argv[1], version);

  CUDA_OK(cudaSetDevice(0));
  ncclComm_t comm = nullptr;
  int dev = 0;
  ncclResult_t r = nccl.initAll(&comm, 1, &dev);
  if (r != ncclSuccess) {
    std::fprintf(stderr, "ncclCommInitAll: %s\n", nccl.errorString(r));
    return 1;
  }
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float *send = nullptr, *recv = nullptr;
  CUDA_OK(cudaMalloc(&send, maxBytes));
  CUDA_OK(cudaMalloc(&recv, maxBytes));
  std::vector<float> host(maxBytes / sizeof(float));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 1000);
  CUDA_OK(cudaMemcpy(send, host.data(), maxBytes, cudaMemcpyHostToDevice));
  // From pageable memory the copy may return before the device is written,
  // and the non-blocking stream below does not wait for the legacy stream.
  CUDA_OK(cudaDeviceSynchronize());

  std::printf("#%11s %10s %8s %10s %10s %8s %8s\n", "size (B)", "oop (us)", "algbw", "ip (us)", "copy (us)", "copybw",
              "#wrong");
  int failed = 0;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 4) {
    const size_t count = bytes / sizeof(float);
    const int iters = bytes <= (size_t(1) << 20) ? 100 : 20;
    r = ncclSuccess;
    double oop = timeUs(stream, 5, iters, [&] {
      if (r == ncclSuccess) r = nccl.allReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream);
    });
    CUDA_OK(cudaMemsetAsync(recv, 0xff, bytes, stream));
    if (r == ncclSuccess) r = nccl.allReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream);
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<float> out(count);
    CUDA_OK(cudaMemcpy(out.data(), recv, count * sizeof(float), cudaMemcpyDeviceToHost));
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += out[i] != host[i];
    double ip = timeUs(stream, 5, iters, [&] {
      if (r == ncclSuccess) r = nccl.allReduce(recv, recv, count, ncclFloat32, ncclSum, comm, stream);
    });
    double copy = timeUs(stream, 5, iters, [&] {
      CUDA_OK(cudaMemcpyAsync(recv, send, bytes, cudaMemcpyDeviceToDevice, stream));
    });
    if (r != ncclSuccess) {
      std::printf("ncclAllReduce of %zu bytes failed: %s\n", bytes, nccl.errorString(r));
      return 1;
    }
    failed += wrong != 0;
    std::printf("%12zu %10.2f %8.1f %10.2f %10.2f %8.1f %8zu\n", bytes, oop, bytes / oop / 1e3, ip, copy,
                bytes / copy / 1e3, wrong);
  }
  nccl.destroy(comm);
  return failed ? 1 : 0;
}
