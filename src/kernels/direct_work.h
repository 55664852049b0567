// The direct executor's one kernel: ranks of different processes that share
// one GPU map each other's buffers (CUDA IPC), and each rank's kernel does its
// share of the call in one pass: out = post(pre(src[0]) op ... op pre(src[n-1]))
// written to every destination (a copy when there is one source and no op).
// AllReduce: share r of every input into share r of every output; Reduce:
// into the root's output; ReduceScatter: block r of every input into this
// rank's output; AllGather: this rank's input into block r of every output;
// Broadcast: share r of the root's input into every output. Each element is
// computed by exactly one rank, so every rank ends with the same bits.
// The loop is written once for the CUDA kernel and its host emulation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/kernels/primitives/host_device.h"
#include "src/kernels/primitives/reduce_op.h"

namespace gyre {

constexpr int kMaxDirectRanks = 8;

struct DirectCall {
  const void* src[kMaxDirectRanks];
  void* dst[kMaxDirectRanks];
  int32_t nsrc = 0;
  int32_t ndst = 0;
  uint64_t count = 0;       // elements of this rank's share
  uint8_t datatype = 0, redop = 0;
  uint8_t reduce = 0;       // 0: copy src[0] as is
  int32_t nranks = 1;       // for avg
  // PreMulSum: every rank multiplies its own input by its own scalar, so
  // source k (rank k's input) has its rank's scalar: by value, or where it
  // lives in device memory (ncclScalarDevice, read when the kernel runs).
  // `scalar` only picks the operator's type (visitCallOp).
  int32_t hasScalar = 0;
  unsigned char scalar[8] = {};
  unsigned char sourceScalar[kMaxDirectRanks][8] = {};
  const void* sourceScalarPtr[kMaxDirectRanks] = {};
  const volatile uint32_t* abort = nullptr;  // device memory: set when a peer died or on abort, skip the work
  int32_t maxBlocks = 0;    // GYRE_DIRECT_BLOCKS: the grid's cap, 0 for the kernel's own
  uint8_t wholeGpu = 0;     // no other rank's kernel runs beside this one: the default cap is every SM
};

// Every source's PreMulSum scalar as raw bytes, resolved once per launch
// before any element (a scalar in device memory is read by one thread, not
// once per pass or element). Plain bytes, so it can live in shared memory.
struct SourceScalars {
  alignas(8) unsigned char bytes[kMaxDirectRanks][8];
};

// Fills source k's entry: nothing to do for operators without a per-rank
// scalar; a PreMulSum's scalar from the device pointer or the bytes passed.
template <typename Op>
GYRE_HOST_DEVICE void resolveSourceScalar(const Op&, const DirectCall&, int, SourceScalars&) {}
template <typename T>
GYRE_HOST_DEVICE void resolveSourceScalar(const OpPreMulSum<T>&, const DirectCall& c, int k, SourceScalars& s) {
  if (!c.hasScalar) return;
  if (c.sourceScalarPtr[k]) {
    const T value = *static_cast<const T*>(c.sourceScalarPtr[k]);
    memcpy(s.bytes[k], &value, sizeof(T));
  } else {
    memcpy(s.bytes[k], c.sourceScalar[k], sizeof(T));
  }
}

// The operator for source k: a user's PreMulSum with that source's resolved
// scalar; any other operator (a float average is a PreMulSum by 1/n) as it is.
template <typename Op>
GYRE_HOST_DEVICE Op sourceOp(const Op& op, const DirectCall&, const SourceScalars&, int) {
  return op;
}
template <typename T>
GYRE_HOST_DEVICE OpPreMulSum<T> sourceOp(const OpPreMulSum<T>& op, const DirectCall& c, const SourceScalars& s,
                                         int k) {
  if (!c.hasScalar) return op;
  OpPreMulSum<T> o = op;
  memcpy(&o.scalar, s.bytes[k], sizeof(T));
  return o;
}

// Elements [first, count) stepping by `stride` (a thread's grid-stride slice).
template <typename T, typename Op>
GYRE_HOST_DEVICE void directElements(const DirectCall& c, const Op& op, const SourceScalars& scalars, size_t first,
                                     size_t stride) {
  const T* const* src = reinterpret_cast<const T* const*>(c.src);
  T* const* dst = reinterpret_cast<T* const*>(c.dst);
  for (size_t i = first; i < c.count; i += stride) {
    T v = src[0][i];
    if (c.reduce) {
      v = sourceOp(op, c, scalars, 0).pre(v);
      for (int k = 1; k < c.nsrc; ++k) v = op.apply(v, sourceOp(op, c, scalars, k).pre(src[k][i]));
      v = op.post(v);
    }
    for (int k = 0; k < c.ndst; ++k) dst[k][i] = v;
  }
}

}  // namespace gyre
