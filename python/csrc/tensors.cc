#include "tensors.h"

#include <c10/util/Exception.h>

#include "types.h"

namespace torch_gyre {

ncclDataType_t checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "gyre backend: ", what, " got an undefined tensor");
  // gyre's device communicators are not wired to torch's CUDA streams in
  // this backend yet: a CUDA tensor gets a clear refusal, not a crash.
  TORCH_CHECK(t.device().is_cpu(), "gyre backend: ", what, " got a tensor on ", t.device().str(),
              "; the gyre backend runs CPU tensors only (use backend=\"cpu:gyre,cuda:nccl\" or move the "
              "tensor to the CPU)");
  TORCH_CHECK(t.layout() == at::kStrided, "gyre backend: ", what, " supports dense (strided) tensors only, got ",
              t.layout());
  return toNcclType(t.scalar_type(), what);
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "gyre backend: ", what, " takes one tensor per process, got ", tensors.size());
  return tensors[0];
}

void checkShape(const at::Tensor& t, int64_t numel, at::ScalarType dtype, const char* what, const char* arg) {
  TORCH_CHECK(t.scalar_type() == dtype, "gyre backend: ", what, ": ", arg, " has dtype ",
              c10::toString(t.scalar_type()), " but the input has ", c10::toString(dtype));
  TORCH_CHECK(t.numel() == numel, "gyre backend: ", what, ": ", arg, " has ", t.numel(),
              " elements, expected ", numel);
}

at::Tensor concat(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> flat;
  flat.reserve(parts.size());
  for (const at::Tensor& p : parts) flat.push_back(p.reshape({-1}));
  return at::cat(flat);
}

void copySlicesInto(const at::Tensor& flat, std::vector<at::Tensor>& parts) {
  int64_t offset = 0;
  for (at::Tensor& p : parts) {
    p.copy_(flat.narrow(0, offset, p.numel()).view(p.sizes()));
    offset += p.numel();
  }
}

}  // namespace torch_gyre
