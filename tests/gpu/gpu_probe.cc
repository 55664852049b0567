// Exit 0 when this process can use a CUDA GPU, 77 (meson's "skipped")
// otherwise, saying why: the gate of the `gpu` test suite (run_on_gpu.sh).
#include <cstdio>

#include <cuda_runtime.h>

int main() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("no usable CUDA GPU (%s)\n", err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return 77;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%d CUDA GPU(s); device 0: %s, sm_%d%d\n", count, prop.name, prop.major, prop.minor);
  return 0;
}
