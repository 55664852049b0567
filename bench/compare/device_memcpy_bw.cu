// device_memcpy_bw: the GPU's own copy rate, the ceiling for collectives of
// ranks that share one GPU (each rank's bytes are read and written once):
// cudaMemcpy device to device of SIZE bytes, timed with CUDA events over
// ITERS copies.
//
//   device_memcpy_bw [SIZE_MiB=256] [ITERS=20]
//
// Prints "copy GB/s" (bytes copied per second) and "read+write GB/s" (twice
// that: every byte is read once and written once), and the busbw bound for
// N ranks on the GPU: a minimal AllReduce moves 2*N*S bytes of memory
// traffic, so algbw <= rw / (2N) and busbw = algbw * 2(N-1)/N.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                               \
  do {                                                                            \
    cudaError_t e_ = (call);                                                      \
    if (e_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));            \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  size_t bytes = mib << 20;
  void *a = nullptr, *b = nullptr;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 1, bytes));
  CHECK(cudaMemset(b, 0, bytes));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));  // warm-up
  CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
  CHECK(cudaEventRecord(stop));
  CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, start, stop));
  double copy = static_cast<double>(bytes) * iters / (ms * 1e-3) / 1e9;
  double rw = 2 * copy;
  std::printf("# device_memcpy_bw: %zu MiB x %d\n", mib, iters);
  std::printf("copy GB/s %.1f\nread+write GB/s %.1f\n", copy, rw);
  for (int n : {2, 4}) std::printf("busbw bound %d ranks GB/s %.1f\n", n, rw / (2.0 * n) * 2.0 * (n - 1) / n);
  cudaFree(a);
  cudaFree(b);
  return 0;
}
