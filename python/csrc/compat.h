// The one place where torch 1.x and 2.x differ for a c10d backend.
//
// torch 1.13 (Debian's python3-torch) has third-party backends derive from
// c10d::ProcessGroup and bind them under ProcessGroup in Python; torch 2.x
// splits the user-facing ProcessGroup from per-device c10d::Backend objects,
// and a plugin derives from Backend. Coalescing hooks and the PREMUL_SUM
// factor also changed shape. Everything else in python/csrc is written
// against the part of the API both versions share.
//
// Both sides are compiled and tested: 1.13 on Debian 12 (the host build),
// 2.6 on Debian 13 (scripts/test --torch2), from this one source. Hooks that
// 2.6's c10d::Backend lacks but later 2.x revisions declare (abort,
// shutdown, supportsCoalescing, split) sit in layers that detect the
// declaration, so they compile to nothing on 1.13 and 2.6; their bodies
// were checked by hand against those revisions' headers, not compiled.
// docs/TORCH-2X.md lists what runs where.
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

#include <chrono>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
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

// Two shapes changed inside 2.x rather than at 2.0, so they are detected
// from the headers instead of guessed from the version number:
// - the PREMUL_SUM supplement holds a list of tensors (`tensor_factors`,
//   1.13 and early 2.x) or one tensor (`tensor_factor`, later 2.x);
// - endCoalescing takes the ops' Work list (1.13, early 2.x) or nothing and
//   returns one Work for the batch (later 2.x).
template <class S, class = void>
struct HasOneTensorFactor : std::false_type {};
template <class S>
struct HasOneTensorFactor<S, std::void_t<decltype(std::declval<S&>().tensor_factor)>> : std::true_type {};

template <class B, class = void>
struct EndCoalescingReturnsWork : std::false_type {};
template <class B>
struct EndCoalescingReturnsWork<B, std::void_t<decltype(std::declval<B&>().endCoalescing())>> : std::true_type {};

// A template so that only the branch for this torch's member is compiled.
template <class Supplement>
bool preMulFactorOf(const Supplement& s, double* factor, at::Tensor* tensorFactor) {
  if constexpr (HasOneTensorFactor<Supplement>::value) {
    if (s.tensor_factor.defined()) {
      *tensorFactor = s.tensor_factor;
      return true;
    }
  } else {
    if (!s.tensor_factors.empty()) {
      *tensorFactor = s.tensor_factors.front();
      return true;
    }
  }
  *factor = s.double_factor;
  return true;
}

// The PREMUL_SUM factor as a double, or as a one-element tensor when the
// user passed a tensor. NCCLPreMulSumSupplement is the name in 1.13 and,
// kept for compatibility beside PreMulSumSupplement, in later 2.x.
inline bool preMulFactor(const c10d::ReduceOp& op, double* factor, at::Tensor* tensorFactor) {
  auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  if (s == nullptr) return false;
  return preMulFactorOf(*s, factor, tensorFactor);
}

// The backend's base class with coalescing under gyre's own names: ops
// issued between openBatch and closeBatch run as one ncclGroupStart/End.
// Where endCoalescing receives the ops' Work objects they already belong to
// the batch; where it returns one Work, that is closeBatch's.
// Partial specializations over the base (not full ones), so that only the
// one this torch selects is compiled.
template <bool kReturnsWork, class Base>
class CoalescingHooks;

template <class Base>
class CoalescingHooks<true, Base> : public Base {
 public:
  CoalescingHooks(int rank, int size) : Base(rank, size) {}
  virtual void openBatch() = 0;
  virtual c10::intrusive_ptr<c10d::Work> closeBatch() = 0;
  void startCoalescing() override { openBatch(); }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override { return closeBatch(); }
};

template <class Base>
class CoalescingHooks<false, Base> : public Base {
 public:
  CoalescingHooks(int rank, int size) : Base(rank, size) {}
  virtual void openBatch() = 0;
  virtual c10::intrusive_ptr<c10d::Work> closeBatch() = 0;
  void startCoalescing() override { openBatch(); }
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) override { closeBatch(); }
};

// Hooks that only some torch 2.x revisions declare on c10d::Backend: each
// layer overrides torch's method where the base declares it and is empty
// where it does not, so `override` never names a method that is missing.
// On 1.x none of them exists and every layer is the empty one.
#define GYRE_DECLARES(Trait, member)                                                        \
  template <class B, class = void>                                                         \
  struct Trait : std::false_type {};                                                       \
  template <class B>                                                                       \
  struct Trait<B, std::void_t<decltype(&B::member)>> : std::bool_constant<(GYRE_TORCH_MAJOR >= 2)> {};
GYRE_DECLARES(DeclaresSupportsCoalescing, supportsCoalescing)
GYRE_DECLARES(DeclaresAbort, abort)
GYRE_DECLARES(DeclaresShutdown, shutdown)
GYRE_DECLARES(DeclaresSupportsSplitting, supportsSplitting)
GYRE_DECLARES(DeclaresEagerConnect, eagerConnectSingleDevice)
GYRE_DECLARES(DeclaresTensorCoalesced, allgather_into_tensor_coalesced)
#undef GYRE_DECLARES

// split(store, ranks, options), the form ProcessGroup::splitGroup calls
// (an earlier 2.x revision declares supportsSplitting without it).
template <class B, class = void>
struct DeclaresSplit : std::false_type {};
template <class B>
struct DeclaresSplit<B, std::void_t<decltype(std::declval<B&>().split(
                            std::declval<const c10::intrusive_ptr<c10d::Store>&>(), std::declval<const std::vector<int>&>(),
                            std::declval<const c10::intrusive_ptr<typename B::Options>&>()))>>
    : std::bool_constant<(GYRE_TORCH_MAJOR >= 2)> {};

// supportsCoalescing(): true, so batch_isend_irecv and the coalescing
// manager hand their ops to startCoalescing/endCoalescing (one gyre group)
// instead of issuing them one by one.
template <bool kDeclared, class Base>
class CoalescingSupport : public Base {
 public:
  using Base::Base;
};
template <class Base>
class CoalescingSupport<true, Base> : public Base {
 public:
  using Base::Base;
  bool supportsCoalescing() const override { return true; }
};

// abort(): stop now, failing what is queued; shutdown(): finish what is
// queued, then release the communicator. Both under gyre's names, which
// the process group implements (lifecycle.cc) whatever the torch.
template <bool kDeclared, class Base>
class AbortHook : public Base {
 public:
  using Base::Base;
  virtual void abortNow() = 0;
};
template <class Base>
class AbortHook<true, Base> : public Base {
 public:
  using Base::Base;
  virtual void abortNow() = 0;
  void abort() override { abortNow(); }
};

template <bool kDeclared, class Base>
class ShutdownHook : public Base {
 public:
  using Base::Base;
  virtual void shutdownNow() = 0;
};
template <class Base>
class ShutdownHook<true, Base> : public Base {
 public:
  using Base::Base;
  virtual void shutdownNow() = 0;
  void shutdown() override { shutdownNow(); }
};

// split(): torch 2.x's new_group/split_group by splitting this group's
// communicators (ncclCommSplit) instead of making new ones through the
// store; supportsSplitting() says so. `Root` is the class declaring split
// (c10d::Backend), whose pointer split returns.
template <bool kDeclared, class Base, class Root>
class SplitHook : public Base {
 public:
  using Base::Base;
  virtual c10::intrusive_ptr<Root> splitMembers(const c10::intrusive_ptr<c10d::Store>& store,
                                                const std::vector<int>& ranks, std::chrono::milliseconds timeout) = 0;
};
template <class Base, class Root>
class SplitHook<true, Base, Root> : public Base {
 public:
  using Base::Base;
  virtual c10::intrusive_ptr<Root> splitMembers(const c10::intrusive_ptr<c10d::Store>& store,
                                                const std::vector<int>& ranks, std::chrono::milliseconds timeout) = 0;
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<Root> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                 const c10::intrusive_ptr<typename Root::Options>& opts) override {
    return splitMembers(store, ranks, opts ? std::chrono::milliseconds(opts->timeout) : std::chrono::milliseconds(0));
  }
};

// eagerConnectSingleDevice(device): init_process_group(device_id=...) makes
// the device communicator at once.
template <bool kDeclared, class Base>
class EagerConnectHook : public Base {
 public:
  using Base::Base;
  virtual void bindDevice(int device) = 0;
};
template <class Base>
class EagerConnectHook<true, Base> : public Base {
 public:
  using Base::Base;
  virtual void bindDevice(int device) = 0;
  void eagerConnectSingleDevice(at::Device device) override {
    if (device.is_cuda()) bindDevice(device.index());
  }
};

// allgather_into_tensor_coalesced / reduce_scatter_tensor_coalesced (2.x):
// what _coalescing_manager calls for all_gather_into_tensor and
// reduce_scatter_tensor issued inside it. 1.13 has neither.
template <bool kDeclared, class Base>
class TensorCoalescedHooks : public Base {
 public:
  using Base::Base;
  virtual c10::intrusive_ptr<c10d::Work> allgatherIntoTensorCoalesced(std::vector<at::Tensor>& outputs,
                                                                      std::vector<at::Tensor>& inputs) = 0;
  virtual c10::intrusive_ptr<c10d::Work> reduceScatterTensorCoalesced(std::vector<at::Tensor>& outputs,
                                                                      std::vector<at::Tensor>& inputs,
                                                                      const c10d::ReduceScatterOptions& opts) = 0;
};
// Where the base declares them, the same hooks, overridden to call gyre's.
template <class Base>
class TensorCoalescedHooks<true, Base> : public TensorCoalescedHooks<false, Base> {
 public:
  using TensorCoalescedHooks<false, Base>::TensorCoalescedHooks;
  using TensorCoalescedHooks<false, Base>::allgatherIntoTensorCoalesced;
  using TensorCoalescedHooks<false, Base>::reduceScatterTensorCoalesced;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& /*opts*/) override {
    return allgatherIntoTensorCoalesced(outputs, inputs);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override {
    return reduceScatterTensorCoalesced(outputs, inputs, opts);
  }
};

using WithTensorCoalesced = TensorCoalescedHooks<DeclaresTensorCoalesced<BackendBase>::value, BackendBase>;
using WithCoalescingSupport = CoalescingSupport<DeclaresSupportsCoalescing<BackendBase>::value, WithTensorCoalesced>;
using WithAbort = AbortHook<DeclaresAbort<BackendBase>::value, WithCoalescingSupport>;
using WithShutdown = ShutdownHook<DeclaresShutdown<BackendBase>::value, WithAbort>;
using WithSplit = SplitHook<DeclaresSplit<BackendBase>::value && DeclaresSupportsSplitting<BackendBase>::value,
                            WithShutdown, BackendBase>;
using WithEagerConnect = EagerConnectHook<DeclaresEagerConnect<BackendBase>::value, WithSplit>;
using BackendAdapter = CoalescingHooks<EndCoalescingReturnsWork<BackendBase>::value, WithEagerConnect>;

}  // namespace torch_gyre::compat
