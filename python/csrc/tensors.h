// The tensor checks and buffer shapes every operation shares.
#pragma once

#include <vector>

#include <gyre.h>

#include "compat.h"

namespace torch_gyre {

// A CPU strided tensor gyre may use, or a TORCH_CHECK error naming the
// operation, the device and what is allowed. Returns its gyre data type.
ncclDataType_t checkTensor(const at::Tensor& t, const char* what);

// The one tensor of a one-tensor-per-process call (torch's multi-device
// lists are not supported).
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what);

// Throws unless `t` has `numel` elements and `dtype`, naming the argument.
void checkShape(const at::Tensor& t, int64_t numel, at::ScalarType dtype, const char* what, const char* arg);

// A dense buffer for a tensor: the tensor itself when contiguous, else a
// contiguous copy whose contents writeBack() returns to the tensor (for the
// tensors a call writes).
struct Dense {
  at::Tensor user;
  at::Tensor buf;
  explicit Dense(const at::Tensor& t) : user(t), buf(t.is_contiguous() ? t : t.contiguous()) {}
  void writeBack() const {
    if (!buf.is_same(user)) user.copy_(buf);
  }
  void* data() const { return buf.data_ptr(); }
  size_t count() const { return static_cast<size_t>(buf.numel()); }
};

// One flat buffer holding `parts` after each other (for list-shaped
// all_gather / reduce_scatter / gather / scatter).
at::Tensor concat(const std::vector<at::Tensor>& parts);
// Copies consecutive slices of `flat` into `parts`.
// (Not named `split`: torch 2.x's Backend has a virtual split() that would hide it
// inside the process group's members.)
void copySlicesInto(const at::Tensor& flat, std::vector<at::Tensor>& parts);

}  // namespace torch_gyre
