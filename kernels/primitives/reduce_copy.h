// The element loops every schedule step ends in: copy a chunk (applying the
// op's pre/post where the step says so) or reduce a received chunk with a
// local one, writing one or two outputs. Shared by the host executor and the
// CUDA kernels (a kernel hands each thread its own sub-range). No __restrict__: in-place calls alias local and
// dst0 element for element, and GCC vectorizes behind a runtime overlap check.
#pragma once

#include <cstddef>

#include "kernels/primitives/host_device.h"

namespace gyre {

// dst0[i] (and dst1[i] if non-null) = post?(pre?(src[i]))
template <typename T, typename Op, bool Pre, bool Post>
GYRE_HOST_DEVICE void copyElements(const Op& op, const T* src, T* dst0,
                                   T* dst1, size_t n) {
  if (dst1) {
    for (size_t i = 0; i < n; ++i) {
      T v = src[i];
      if constexpr (Pre) v = op.pre(v);
      if constexpr (Post) v = op.post(v);
      dst0[i] = v;
      dst1[i] = v;
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      T v = src[i];
      if constexpr (Pre) v = op.pre(v);
      if constexpr (Post) v = op.post(v);
      dst0[i] = v;
    }
  }
}

// dst0[i] (and dst1[i]) = post?(apply(received[i], pre?(local[i])))
template <typename T, typename Op, bool Pre, bool Post, bool LocalFirst = false>
GYRE_HOST_DEVICE void reduceElements(const Op& op, const T* received, const T* local,
                                     T* dst0, T* dst1, size_t n) {
  if (dst1) {
    for (size_t i = 0; i < n; ++i) {
      T l = local[i];
      if constexpr (Pre) l = op.pre(l);
      T v = LocalFirst ? op.apply(l, received[i]) : op.apply(received[i], l);
      if constexpr (Post) v = op.post(v);
      dst0[i] = v;
      dst1[i] = v;
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      T l = local[i];
      if constexpr (Pre) l = op.pre(l);
      T v = LocalFirst ? op.apply(l, received[i]) : op.apply(received[i], l);
      if constexpr (Post) v = op.post(v);
      dst0[i] = v;
    }
  }
}

}  // namespace gyre
