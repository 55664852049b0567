/* nccl_device/reduce_copy.h — NCCL's reduce and copy building blocks: a
 * group of threads (a Coop) reads `count` elements of T from nSrc sources,
 * combines them element by element, and writes the result to nDst
 * destinations. Sources and destinations are given as callables (index ->
 * T*), as an ncclSymPtr or a window and offset over a team (index i: the
 * team's rank i), or as local pointers `displ` elements apart. Counts are
 * in elements; the group shares the elements between its threads, and the
 * call does not synchronise the group (callers meet at a barrier or sync()
 * before reading what another thread wrote).
 *
 * Sums use T's +; ncclLsaReduceLsaCopy takes any operator `T op(T, T)`
 * (nccl::utility::OpSum<T> is the sum). Results do not depend on how
 * many threads the group has: each element is combined in source order.
 * Each call looks up the sources' and destinations' addresses once and
 * moves 16-byte vectors where every buffer is equally aligned.
 *
 * gyre has no multimem: the ncclMultimem* variants and the *MultimemCopy
 * ones compile and stop the kernel with a message when called (ncclDevCommCreate
 * refuses multimem, so no device communicator offers a multimem handle). */
#ifndef GYRE_NCCL_DEVICE_REDUCE_COPY_H_
#define GYRE_NCCL_DEVICE_REDUCE_COPY_H_

#include "coop.h"
#include "ptr.h"

#ifdef __cplusplus

namespace nccl {
namespace utility {
template <typename T>
struct OpSum {
  using EltType = T;
  GYRE_DEVICE_FN T operator()(const T& a, const T& b) const { return a + b; }
};
}  // namespace utility
}  // namespace nccl

namespace gyre_device {

/* Up to this many sources' and destinations' addresses are looked up once
 * per call (a window's peer table, a user's lambda); more are looked up per
 * 16 bytes. */
constexpr int kResolvedPtrs = 16;

/* The addresses of ptrs(0) .. ptrs(n - 1), looked up once. */
template <typename Ptrs, typename P>
struct Resolved {
  Ptrs ptrs;
  int n;
  P p[kResolvedPtrs];
  GYRE_DEVICE_FN Resolved(Ptrs f, int count) : ptrs(f), n(count) {
    for (int i = 0; i < count && i < kResolvedPtrs; ++i) p[i] = f(i);
  }
  GYRE_DEVICE_FN P operator()(int i) const { return i < kResolvedPtrs ? p[i] : ptrs(i); }
};
template <typename Ptrs>
GYRE_DEVICE_FN Resolved<Ptrs, decltype(static_cast<Ptrs*>(nullptr)->operator()(0))> resolve(Ptrs f, int n) {
  return {f, n};
}

/* 16 bytes of elements, loaded and stored as one vector. */
template <typename T>
struct alignas(16) Pack16 {
  static constexpr int kElems = int(16 / sizeof(T));
  T e[kElems];
};

/* Element i of the result, from every source in order, to every destination. */
template <typename T, typename Src, typename Dst, typename RedOp, typename Index>
GYRE_DEVICE_FN void reduceCopyOne(Src const& src, int nSrc, Dst const& dst, int nDst, RedOp const& op, Index i) {
  T acc = src(0)[i];
  for (int s = 1; s < nSrc; ++s) acc = op(acc, src(s)[i]);
  for (int d = 0; d < nDst; ++d) dst(d)[i] = acc;
}

/* Elements [first, first + n) that start 16-byte aligned in every buffer,
 * as packs: element for element the same combination as reduceCopyOne. */
template <typename T, typename Src, typename Dst, typename RedOp>
GYRE_DEVICE_FN void reduceCopyPacks(Src const& src, int nSrc, Dst const& dst, int nDst, RedOp const& op,
                                    size_t first, size_t packs, size_t rank, size_t step) {
  using P = Pack16<T>;
  for (size_t k = rank; k < packs; k += step) {
    const size_t at = first + k * P::kElems;
    P acc = *reinterpret_cast<const P*>(src(0) + at);
    for (int s = 1; s < nSrc; ++s) {
      const P v = *reinterpret_cast<const P*>(src(s) + at);
      for (int j = 0; j < P::kElems; ++j) acc.e[j] = op(acc.e[j], v.e[j]);
    }
    for (int d = 0; d < nDst; ++d) *reinterpret_cast<P*>(dst(d) + at) = acc;
  }
}

/* Bytes past the last 16-byte boundary at or below p (the same for every
 * buffer of a call, or the call is not vectorised). */
GYRE_DEVICE_FN size_t misalignment(const void* p) { return size_t(reinterpret_cast<uintptr_t>(p) & 15); }

/* The one operation every variant is: element i of the result is
 * op(...op(src(0)[i], src(1)[i])..., src(nSrc-1)[i]), stored to every dst(d)[i].
 * Addresses are looked up once; where every buffer has the same offset from
 * a 16-byte boundary, a scalar head reaches the boundary, 16-byte packs
 * follow and a scalar tail ends. The group's threads take packs (and head
 * and tail elements) in turn. */
template <typename T, typename Coop, typename Src, typename Dst, typename RedOp, typename IntCount>
GYRE_DEVICE_FN void reduceCopy(Coop coop, Src srcOf, int nSrc, Dst dstOf, int nDst, RedOp const& op, IntCount count) {
  if (nSrc <= 0 || nDst <= 0 || count <= IntCount(0)) return;
  const auto src = resolve(srcOf, nSrc);
  const auto dst = resolve(dstOf, nDst);
  const size_t n = size_t(count), rank = size_t(coop.thread_rank()), step = size_t(coop.size());
  size_t head = n, packs = 0;  // not vectorised: every element is "head"
  if (16 % sizeof(T) == 0 && sizeof(T) < 16) {
    const size_t mis = misalignment(src(0));
    bool same = mis % sizeof(T) == 0;
    for (int s = 1; same && s < nSrc; ++s) same = misalignment(src(s)) == mis;
    for (int d = 0; same && d < nDst; ++d) same = misalignment(dst(d)) == mis;
    if (same) {
      head = mis ? (16 - mis) / sizeof(T) : 0;
      if (head > n) head = n;
      packs = (n - head) / Pack16<T>::kElems;
    }
  }
  for (size_t i = rank; i < head; i += step) reduceCopyOne<T>(src, nSrc, dst, nDst, op, i);
  reduceCopyPacks<T>(src, nSrc, dst, nDst, op, head, packs, rank, step);
  for (size_t i = head + packs * Pack16<T>::kElems + rank; i < n; i += step)
    reduceCopyOne<T>(src, nSrc, dst, nDst, op, i);
}

[[noreturn]] GYRE_DEVICE_FN void noMultimem() { unavailable("multimem (NVLink SHARP)"); }

/* Sources or destinations as the ranks of a team in a window. */
template <typename T>
struct TeamPtrs {
  ncclSymPtr<T> p;
  ncclTeam team;
  GYRE_DEVICE_FN T* operator()(int i) const { return p.peerPtr(team, i); }
};
/* n local buffers, displ elements apart. */
template <typename T>
struct StridedPtrs {
  T* base;
  size_t displ;
  GYRE_DEVICE_FN T* operator()(int i) const { return base + size_t(i) * displ; }
};
/* One pointer, whatever the index. */
template <typename T>
struct OnePtr {
  T* p;
  GYRE_DEVICE_FN T* operator()(int) const { return p; }
};

}  // namespace gyre_device

#define GYRE_UNROLL_DEFAULT(T) int UNROLL = 4 * 16 / int(sizeof(T))  // accepted for NCCL's signatures

/* ---- Any sources to any destinations (lambdas) ---------------------------- */
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename RedOp, typename IntCount,
          GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceLsaCopy(Coop coop, SrcLambda src, int nSrc, DstLambda dst, int nDst,
                                         RedOp const& op, IntCount count) {
  gyre_device::reduceCopy<T>(coop, src, nSrc, dst, nDst, op, count);
}
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename IntCount,
          GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumLsaCopy(Coop coop, SrcLambda src, int nSrc, DstLambda dst, int nDst,
                                            IntCount count) {
  gyre_device::reduceCopy<T>(coop, src, nSrc, dst, nDst, nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename RedOp, typename IntCount,
          GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceMultimemCopy(Coop, SrcLambda, int, DstLambda, int, RedOp const&, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename IntCount,
          GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumMultimemCopy(Coop, SrcLambda, int, DstLambda, int, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename IntCount,
          GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSumLsaCopy(Coop, SrcLambda, int, DstLambda, int, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename SrcLambda, typename DstLambda, typename IntCount,
          GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSumMultimemCopy(Coop, SrcLambda, int, DstLambda, int, IntCount) {
  gyre_device::noMultimem();
}

/* ---- Reduce: N sources to one local destination --------------------------- */
template <typename T, typename Coop, typename SrcLambda, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSum(Coop coop, SrcLambda src, int nSrc, T* dst, IntCount count) {
  gyre_device::reduceCopy<T>(coop, src, nSrc, gyre_device::OnePtr<T>{dst}, 1, nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSum(Coop coop, ncclSymPtr<T> src, T* dst, IntCount count, ncclTeam team) {
  gyre_device::reduceCopy<T>(coop, gyre_device::TeamPtrs<T>{src, team}, team.nRanks, gyre_device::OnePtr<T>{dst}, 1,
                             nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSum(Coop coop, ncclSymPtr<T> src, T* dst, IntCount count, ncclDevComm_t const& comm) {
  ncclLsaReduceSum<T>(coop, src, dst, count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSum(Coop coop, ncclWindow_t w, size_t offset, T* dst, IntCount count, ncclTeam team) {
  ncclLsaReduceSum<T>(coop, ncclSymPtr<T>(w, offset), dst, count, team);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSum(Coop coop, ncclWindow_t w, size_t offset, T* dst, IntCount count,
                                     ncclDevComm_t const& comm) {
  ncclLsaReduceSum<T>(coop, ncclSymPtr<T>(w, offset), dst, count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename SrcLambda, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLocalReduceSum(Coop coop, SrcLambda src, int nSrc, T* dst, IntCount count) {
  gyre_device::reduceCopy<T>(coop, src, nSrc, gyre_device::OnePtr<T>{dst}, 1, nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLocalReduceSum(Coop coop, int nSrc, T* base, size_t displ, T* dst, IntCount count) {
  gyre_device::reduceCopy<T>(coop, gyre_device::StridedPtrs<T>{base, displ}, nSrc, gyre_device::OnePtr<T>{dst}, 1,
                             nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSum(Coop, ncclSymPtr<T>, T*, IntCount, ncclMultimemHandle) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSum(Coop, T*, T*, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSum(Coop, ncclWindow_t, size_t, T*, IntCount, ncclMultimemHandle) {
  gyre_device::noMultimem();
}

/* ---- Copy: one local source to N destinations ----------------------------- */
template <typename T, typename Coop, typename DstLambda, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaCopy(Coop coop, T* src, DstLambda dst, int nDst, IntCount count) {
  gyre_device::reduceCopy<T>(coop, gyre_device::OnePtr<T>{src}, 1, dst, nDst, nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaCopy(Coop coop, T* src, ncclSymPtr<T> dst, IntCount count, ncclTeam team) {
  gyre_device::reduceCopy<T>(coop, gyre_device::OnePtr<T>{src}, 1, gyre_device::TeamPtrs<T>{dst, team}, team.nRanks,
                             nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaCopy(Coop coop, T* src, ncclSymPtr<T> dst, IntCount count, ncclDevComm_t const& comm) {
  ncclLsaCopy<T>(coop, src, dst, count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaCopy(Coop coop, T* src, ncclWindow_t w, size_t offset, IntCount count, ncclTeam team) {
  ncclLsaCopy<T>(coop, src, ncclSymPtr<T>(w, offset), count, team);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaCopy(Coop coop, T* src, ncclWindow_t w, size_t offset, IntCount count,
                                ncclDevComm_t const& comm) {
  ncclLsaCopy<T>(coop, src, ncclSymPtr<T>(w, offset), count, ncclTeamLsa(comm));
}
template <typename T, typename Coop, typename DstLambda, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLocalCopy(Coop coop, T* src, DstLambda dst, int nDst, IntCount count) {
  gyre_device::reduceCopy<T>(coop, gyre_device::OnePtr<T>{src}, 1, dst, nDst, nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLocalCopy(Coop coop, T* src, int nDst, T* base, size_t displ, IntCount count) {
  gyre_device::reduceCopy<T>(coop, gyre_device::OnePtr<T>{src}, 1, gyre_device::StridedPtrs<T>{base, displ}, nDst,
                             nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemCopy(Coop, T*, ncclSymPtr<T>, IntCount, ncclMultimemHandle) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemCopy(Coop, T*, T*, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemCopy(Coop, T*, ncclWindow_t, size_t, IntCount, ncclMultimemHandle) {
  gyre_device::noMultimem();
}

/* ---- Reduce and copy: N sources to M destinations ------------------------- */
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumCopy(Coop coop, ncclSymPtr<T> src, ncclTeam srcTeam, ncclSymPtr<T> dst,
                                         ncclTeam dstTeam, IntCount count) {
  gyre_device::reduceCopy<T>(coop, gyre_device::TeamPtrs<T>{src, srcTeam}, srcTeam.nRanks,
                             gyre_device::TeamPtrs<T>{dst, dstTeam}, dstTeam.nRanks, nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumCopy(Coop coop, ncclSymPtr<T> src, ncclSymPtr<T> dst, IntCount count,
                                         ncclTeam team) {
  ncclLsaReduceSumCopy<T>(coop, src, team, dst, team, count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumCopy(Coop coop, ncclSymPtr<T> src, ncclSymPtr<T> dst, IntCount count,
                                         ncclDevComm_t const& comm) {
  ncclLsaReduceSumCopy<T>(coop, src, ncclTeamLsa(comm), dst, ncclTeamLsa(comm), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumCopy(Coop coop, ncclWindow_t srcWin, size_t srcOffset, ncclWindow_t dstWin,
                                         size_t dstOffset, IntCount count, ncclTeam team) {
  ncclLsaReduceSumCopy<T>(coop, ncclSymPtr<T>(srcWin, srcOffset), team, ncclSymPtr<T>(dstWin, dstOffset), team, count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumCopy(Coop coop, ncclWindow_t srcWin, size_t srcOffset, ncclWindow_t dstWin,
                                         size_t dstOffset, IntCount count, ncclDevComm_t const& comm) {
  ncclLsaReduceSumCopy<T>(coop, ncclSymPtr<T>(srcWin, srcOffset), ncclTeamLsa(comm), ncclSymPtr<T>(dstWin, dstOffset),
                          ncclTeamLsa(comm), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLocalReduceSumCopy(Coop coop, int nSrc, T* srcBase, size_t srcDispl, int nDst, T* dstBase,
                                           size_t dstDispl, IntCount count) {
  gyre_device::reduceCopy<T>(coop, gyre_device::StridedPtrs<T>{srcBase, srcDispl}, nSrc,
                             gyre_device::StridedPtrs<T>{dstBase, dstDispl}, nDst, nccl::utility::OpSum<T>(), count);
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSumCopy(Coop, ncclSymPtr<T>, ncclMultimemHandle, ncclSymPtr<T>,
                                              ncclMultimemHandle, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSumCopy(Coop, T*, T*, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSumCopy(Coop, ncclWindow_t, size_t, ncclMultimemHandle, ncclWindow_t, size_t,
                                              ncclMultimemHandle, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumMultimemCopy(Coop, ncclSymPtr<T>, ncclTeam, ncclSymPtr<T>, ncclMultimemHandle,
                                                 IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclLsaReduceSumMultimemCopy(Coop, ncclSymPtr<T>, ncclTeam, T*, IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSumLsaCopy(Coop, ncclSymPtr<T>, ncclMultimemHandle, ncclSymPtr<T>, ncclTeam,
                                                 IntCount) {
  gyre_device::noMultimem();
}
template <typename T, typename Coop, typename IntCount, GYRE_UNROLL_DEFAULT(T)>
GYRE_DEVICE_FN void ncclMultimemReduceSumLsaCopy(Coop, T*, ncclSymPtr<T>, ncclTeam, IntCount) {
  gyre_device::noMultimem();
}

#undef GYRE_UNROLL_DEFAULT

#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_REDUCE_COPY_H_ */
