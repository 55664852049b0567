// The one place where torch 1.x and 2.x differ for a c10d backend.
//
// torch 1.13 (Debian's python3-torch) has third-party backends derive from
// c10d::ProcessGroup and bind them under ProcessGroup in Python; torch 2.x
// splits the user-facing ProcessGroup from per-device c10d::Backend objects,
// and a plugin derives from Backend. Coalescing hooks and the PREMUL_SUM
// factor also changed shape. Everything else in python/csrc is written
// against the part of the API both versions share.
//
// Debian's 1.13 ships no <torch/version.h>; pip wheels (2.x) do, so its
// absence means 1.x. Meson also passes GYRE_TORCH_MAJOR from the interpreter,
// which wins when present.
#pragma once

#if __has_include(<torch/version.h>)
#include <torch/version.h>
#endif

#if !defined(GYRE_TORCH_MAJOR)
#if defined(TORCH_VERSION_MAJOR)
#define GYRE_TORCH_MAJOR TORCH_VERSION_MAJOR
#else
#define GYRE_TORCH_MAJOR 1
#endif
#endif

#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#if GYRE_TORCH_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

namespace torch_gyre::compat {

#if GYRE_TORCH_MAJOR >= 2
using BackendBase = c10d::Backend;
// Python class the extension's class derives from (module, attribute).
inline constexpr const char* kPythonBaseModule = "torch._C._distributed_c10d";
inline constexpr const char* kPythonBaseClass = "Backend";
#else
using BackendBase = c10d::ProcessGroup;
inline constexpr const char* kPythonBaseModule = "torch._C._distributed_c10d";
inline constexpr const char* kPythonBaseClass = "ProcessGroup";
#endif

// The PREMUL_SUM factor as a double, or as a one-element tensor when the
// user passed a tensor (1.13 keeps a list of them, 2.x one tensor).
inline bool preMulFactor(const c10d::ReduceOp& op, double* factor, at::Tensor* tensorFactor) {
  auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  if (s == nullptr) return false;
#if GYRE_TORCH_MAJOR >= 2
  if (s->tensor_factor.defined()) {
    *tensorFactor = s->tensor_factor;
    return true;
  }
#else
  if (!s->tensor_factors.empty()) {
    *tensorFactor = s->tensor_factors.front();
    return true;
  }
#endif
  *factor = s->double_factor;
  return true;
}

// The backend's base class with coalescing under gyre's own names: ops
// issued between openBatch and closeBatch run as one ncclGroupStart/End.
// torch 1.13 hands endCoalescing the ops' Work objects (they already belong
// to the batch); 2.x wants one Work for the whole batch back.
class BackendAdapter : public BackendBase {
 public:
  BackendAdapter(int rank, int size) : BackendBase(rank, size) {}
  virtual void openBatch() = 0;
  virtual c10::intrusive_ptr<c10d::Work> closeBatch() = 0;

  void startCoalescing() override { openBatch(); }
#if GYRE_TORCH_MAJOR >= 2
  c10::intrusive_ptr<c10d::Work> endCoalescing() override { return closeBatch(); }
#else
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) override { closeBatch(); }
#endif
};

}  // namespace torch_gyre::compat
