// makeCudaBackend for a torch_gyre built against a torch without CUDA.
#include "cuda_backend.h"

namespace torch_gyre {

std::unique_ptr<CudaBackend> makeCudaBackend(const c10::intrusive_ptr<c10d::Store>&, int, int,
                                             std::chrono::milliseconds) {
  return nullptr;
}

const char* cudaAbsentReason() {
  return "this torch_gyre was built against a torch without CUDA (rebuild it with a CUDA torch: "
         "pip install --no-build-isolation ./python)";
}

}  // namespace torch_gyre
