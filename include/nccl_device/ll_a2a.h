/* nccl_device/ll_a2a.h — low-latency all-to-all between the ranks of an LSA
 * team (NCCL's ncclLLA2ASession): small values sent straight into a peer's
 * slots and read there without a barrier.
 *
 * Host side: ncclLLA2ACalcSlots says how many slots `maxElts` values of
 * `maxEltSize` bytes take; ncclLLA2ACreateRequirement turns nBlocks x nSlots
 * into a resource requirement for ncclDevCommCreate and a handle naming it.
 *
 * Memory: block b of a handle owns, on every rank, 1 + 2 * nSlots lines of
 * 16 bytes in the device communicator's resource window: a control line
 * (its first word keeps the block's round number, its epoch, from one
 * session to the next) and two halves of nSlots lines. Round e uses half
 * e % 2. A line carries 8 bytes of a value as two 4-byte words, each
 * followed by the round's epoch as a flag, and is written by one 16-byte
 * store; a reader polls the line until both flags equal its own epoch, so
 * value and arrival are seen together with no fence. Two flags per line, so
 * that a line torn into 8-byte halves is never taken for a whole one. A
 * value of more than 8 bytes takes ceil(size / 8) lines, maxElts apart.
 *
 * Why the buffers are never reset: a round's flags differ from the last
 * round's that used the same half, and a rank ends a round (endEpoch) only
 * after hearing from every peer in it, so a peer cannot start writing a half
 * before this rank finished reading it two rounds earlier. Flags skip 0 (the
 * value of freshly zeroed memory); where the 32-bit epoch wraps, each half is
 * cleared once after its last round, so no stale line can match again.
 *
 * Every session on a block must end its rounds with endEpoch, and in each
 * round every rank must send at least one value to each team peer and
 * receive at least one value from each (NCCL's rule). Values are ordered
 * only with their own flags (relaxed): a send does not publish other writes.
 *
 * Multimem (NVLink SHARP) broadcast is not available in gyre: a session
 * made with multimem = true serves send/recv, and its bcast() stops the
 * kernel with a message. So does misuse the session can detect (a slot past
 * maxElts, maxElts past the handle's slots, a block outside the device
 * communicator's resources), and a receive that waits past
 * GYRE_LL_A2A_TIMEOUT_NS (120 s unless defined before this header): a
 * failed kernel instead of a hang. */
#ifndef GYRE_NCCL_DEVICE_LL_A2A_H_
#define GYRE_NCCL_DEVICE_LL_A2A_H_

#include "coop.h"
#include "lsa_barrier.h"

#ifdef __cplusplus
extern "C" {
#endif
/* Slots for maxElts values of maxEltSize bytes: maxElts * ceil(maxEltSize / 8)
 * (-1, with the reason for ncclGetLastError, for a negative or overflowing
 * input). */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
/* A requirement for nBlocks blocks of nSlots slots, and the handle naming
 * it (its bufHandle is filled by ncclDevCommCreate). */
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq);
#ifdef __cplusplus
} /* extern "C" */

#include <stdio.h>
#include <string.h>

#include <type_traits>

#ifndef GYRE_LL_A2A_TIMEOUT_NS
#define GYRE_LL_A2A_TIMEOUT_NS 120000000000ull
#endif

namespace gyre_device {

/* One 16-byte line: a value's 8 bytes as lo/hi, each word with the flag. */
struct alignas(16) LLLine {
  uint32_t lo, loFlag, hi, hiFlag;
};

GYRE_DEVICE_FN constexpr size_t llA2ABlockLines(uint32_t nSlots) { return 1 + 2 * size_t(nSlots); }
template <typename T>
GYRE_DEVICE_FN constexpr int llLinesOf() {
  return int((sizeof(T) + 7) / 8);
}

GYRE_DEVICE_FN void storeLine(LLLine* at, uint32_t lo, uint32_t hi, uint32_t flag) {
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
  asm volatile("st.relaxed.sys.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(lo), "r"(flag), "r"(hi), "r"(flag)
               : "memory");
#else
  asm volatile("st.volatile.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(lo), "r"(flag), "r"(hi), "r"(flag)
               : "memory");
#endif
#else
  /* The host has no portable 16-byte store: each 8-byte half (a word and
   * its flag) is one atomic store, so it is read whole or not at all. */
  uint64_t* half = reinterpret_cast<uint64_t*>(at);
  __atomic_store_n(half, uint64_t(lo) | uint64_t(flag) << 32, __ATOMIC_RELAXED);
  __atomic_store_n(half + 1, uint64_t(hi) | uint64_t(flag) << 32, __ATOMIC_RELAXED);
#endif
}

GYRE_DEVICE_FN LLLine loadLine(const LLLine* at) {
  LLLine v;
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 700
  asm volatile("ld.relaxed.sys.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.lo), "=r"(v.loFlag), "=r"(v.hi), "=r"(v.hiFlag)
               : "l"(at)
               : "memory");
#else
  asm volatile("ld.volatile.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.lo), "=r"(v.loFlag), "=r"(v.hi), "=r"(v.hiFlag)
               : "l"(at)
               : "memory");
#endif
#else
  const uint64_t* half = reinterpret_cast<const uint64_t*>(at);
  const uint64_t a = __atomic_load_n(half, __ATOMIC_RELAXED), b = __atomic_load_n(half + 1, __ATOMIC_RELAXED);
  v.lo = uint32_t(a);
  v.loFlag = uint32_t(a >> 32);
  v.hi = uint32_t(b);
  v.hiFlag = uint32_t(b >> 32);
#endif
  return v;
}

/* Orders this thread's earlier stores before its later ones for every
 * observer (the clearing of a half before the next round's sends). */
GYRE_DEVICE_FN void systemFence() {
#if defined(__CUDA_ARCH__)
  __threadfence_system();
#else
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

/* Wall-clock nanoseconds on both sides (the GPU's global timer), so the
 * receive timeout does not depend on the SM clock. */
GYRE_DEVICE_FN uint64_t nanoseconds() {
#if defined(__CUDA_ARCH__)
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return cycles();  // the host's cycles() counts nanoseconds
#endif
}

/* Misuse of a session: say what and stop the kernel (as unavailable()). */
[[noreturn]] GYRE_DEVICE_FN void llA2AMisuse(const char* what, long long a, long long b, int rank) {
  printf("gyre: ncclLLA2ASession on rank %d: %s (%lld, %lld)\n", rank, what, a, b);
#if defined(__CUDA_ARCH__)
  __trap();
  for (;;) {
  }
#else
  fflush(stdout);
  __builtin_trap();
#endif
}

/* The epoch after e: never 0 (zeroed memory), and always the other half. */
GYRE_DEVICE_FN uint32_t nextEpoch(uint32_t e) { return e == 0xFFFFFFFFu ? 2u : e + 1u; }

template <typename T>
T&& declvalOf() noexcept;

}  // namespace gyre_device

template <typename Coop>
struct ncclLLA2ASession {
  /* A session of `coop` on block `block` of `handle`'s buffers, for slots
   * 0 .. maxElts - 1 of values up to nSlots / maxElts lines each. */
  GYRE_DEVICE_FN ncclLLA2ASession(Coop coop, ncclDevComm const& comm, ncclTeam team, ncclLLA2AHandle handle,
                                  uint32_t block, int maxElts, bool multimem = false,
                                  ncclMultimemHandle mmHandle = {})
      : coop_(coop), comm_(comm), team_(team), handle_(handle), pitch_(maxElts), multimem_(multimem) {
    (void)mmHandle;
    if (maxElts < 1 || uint32_t(maxElts) > handle.nSlots)
      gyre_device::llA2AMisuse("maxElts must be 1 .. the handle's nSlots", maxElts, handle.nSlots, comm.rank);
    const size_t lines = gyre_device::llA2ABlockLines(handle.nSlots);
    blockLine_ = size_t(block) * lines;
    const size_t end =
        ncclGetResourceBufferOffset(handle.bufHandle) + (blockLine_ + lines) * sizeof(gyre_device::LLLine);
    if (end > comm.resourceWindow->size)
      gyre_device::llA2AMisuse("the block lies outside this device communicator's resources (block >= nBlocks, "
                               "or a handle of another device communicator)",
                               (long long)block, (long long)comm.resourceWindow->size, comm.rank);
    epoch_ = *controlWord();
    if (epoch_ == 0) epoch_ = 1;
  }
  ncclLLA2ASession(ncclLLA2ASession const&) = delete;

  /* The next session on this block continues from this one's epoch. */
  GYRE_DEVICE_FN ~ncclLLA2ASession() {
    coop_.sync();
    if (coop_.thread_rank() == 0) *controlWord() = epoch_;
    coop_.sync();
  }

  /* `data` into slot `slot` of team rank `peer`. */
  template <typename T>
  GYRE_DEVICE_FN void send(int peer, int slot, T data) {
    checkSlot<T>(slot);
    put(lines(peer) + slot, data);
  }

  /* `data` into slot `slot` of every team rank, this one included. */
  template <typename T>
  GYRE_DEVICE_FN void bcast(int slot, T data) {
    if (multimem_) gyre_device::unavailable("multimem (NVLink SHARP) broadcast of ncclLLA2ASession");
    checkSlot<T>(slot);
    // Starting at this rank spreads the ranks' first stores over the peers.
    for (int i = 0, p = team_.rank; i < team_.nRanks; ++i, p = (p + 1 == team_.nRanks ? 0 : p + 1))
      put(lines(p) + slot, data);
  }

  /* The value a peer sent into this rank's slot `slot` this round. */
  template <typename T>
  GYRE_DEVICE_FN T recv(int slot) {
    T one[1];
    recvUnrolled<1, 1>(slot, 1, 0, one);
    return one[0];
  }

  /* Values of slots eltStart + i * eltStride for i < eltCount
   * (MinEltCount <= eltCount <= MaxEltCount), waiting for all together. */
  template <int MinEltCount, int MaxEltCount, typename T>
  GYRE_DEVICE_FN void recvUnrolled(int eltStart, int eltCount, int eltStride, T (&vals)[MaxEltCount]) {
    static_assert(MinEltCount >= 0 && MinEltCount <= MaxEltCount && MaxEltCount > 0, "0 <= Min <= Max, Max > 0");
    constexpr int L = gyre_device::llLinesOf<T>();
    const int count = eltCount < MinEltCount ? MinEltCount : (eltCount > MaxEltCount ? MaxEltCount : eltCount);
    if (count == 0) return;
    checkSlot<T>(eltStart);
    checkSlot<T>(eltStart + (count - 1) * eltStride);
    gyre_device::LLLine* mine = lines(team_.rank);
    gyre_device::LLLine got[MaxEltCount][L];
    const uint64_t start = gyre_device::nanoseconds();
    for (uint32_t polls = 1;; ++polls) {
      bool all = true;
      for (int u = 0; u < MaxEltCount; ++u) {
        if (u >= count) break;
        for (int v = 0; v < L; ++v) {
          got[u][v] = gyre_device::loadLine(mine + eltStart + u * eltStride + v * pitch_);
          all = all && got[u][v].loFlag == epoch_ && got[u][v].hiFlag == epoch_;
        }
      }
      if (all) break;
      if (polls % 1024 == 0 && gyre_device::nanoseconds() - start > GYRE_LL_A2A_TIMEOUT_NS)
        gyre_device::llA2AMisuse("a receive timed out: no peer sent slot/epoch", eltStart, (long long)epoch_,
                                 comm_.rank);
      gyre_device::pause();
    }
    for (int u = 0; u < MaxEltCount; ++u) {
      if (u >= count) break;
      uint32_t words[L][2];
      for (int v = 0; v < L; ++v) {
        words[v][0] = got[u][v].lo;
        words[v][1] = got[u][v].hi;
      }
      memcpy(static_cast<void*>(&vals[u]), words, sizeof(T));
    }
  }

  /* eltToAcc of each value of slots eltStart + i * eltStride (i < eltCount),
   * combined in slot order by `red`, received Unroll at a time. */
  template <int Unroll, typename Elt, typename EltToAcc, typename Reduce>
  GYRE_DEVICE_FN auto recvReduce(int eltStart, int eltCount, int eltStride, EltToAcc eltToAcc, Reduce red)
      -> decltype(eltToAcc(gyre_device::declvalOf<Elt>())) {
    static_assert(Unroll > 0, "Unroll > 0");
    using Acc = decltype(eltToAcc(gyre_device::declvalOf<Elt>()));
    Acc acc{};
    for (int i = 0; i < eltCount; i += Unroll) {
      const int n = eltCount - i < Unroll ? eltCount - i : Unroll;
      Elt got[Unroll];
      recvUnrolled<1, Unroll>(eltStart + i * eltStride, n, eltStride, got);
      for (int j = 0; j < Unroll; ++j) {
        if (j >= n) break;
        acc = (i == 0 && j == 0) ? eltToAcc(got[0]) : red(acc, eltToAcc(got[j]));
      }
    }
    return acc;
  }

  /* Ends this round; the next sends and receives are the next round's. */
  GYRE_DEVICE_FN void endEpoch(Coop) {
    coop_.sync();  // no thread sends the next round before every thread read this one
    if (epoch_ >= 0xFFFFFFFEu) {
      // This half's last round before the epoch wraps: clear it, so no
      // line of it can match an epoch of the next cycle.
      gyre_device::LLLine* mine = lines(team_.rank);
      for (uint32_t i = coop_.thread_rank(); i < handle_.nSlots; i += coop_.size())
        gyre_device::storeLine(mine + i, 0, 0, 0);
      gyre_device::systemFence();
      coop_.sync();
    }
    epoch_ = gyre_device::nextEpoch(epoch_);
  }

 private:
  GYRE_DEVICE_FN uint32_t* controlWord() const {
    auto* base = static_cast<gyre_device::LLLine*>(ncclGetResourceBufferLocalPointer(comm_, handle_.bufHandle));
    return &base[blockLine_].lo;
  }
  /* Slot 0 of this round's half of team rank `peer`'s block. */
  GYRE_DEVICE_FN gyre_device::LLLine* lines(int peer) const {
    auto* base = static_cast<gyre_device::LLLine*>(
        ncclGetResourceBufferPeerPointer(comm_, handle_.bufHandle, team_, peer));
    return base + blockLine_ + 1 + size_t(epoch_ & 1) * size_t(handle_.nSlots);
  }
  template <typename T>
  GYRE_DEVICE_FN void checkSlot(int slot) const {
    static_assert(std::is_trivially_copyable<T>::value, "ncclLLA2ASession moves values by their bytes");
    if (slot < 0 || slot >= pitch_) gyre_device::llA2AMisuse("slot outside 0 .. maxElts - 1", slot, pitch_, comm_.rank);
    if (uint64_t(gyre_device::llLinesOf<T>()) * uint64_t(pitch_) > handle_.nSlots)
      gyre_device::llA2AMisuse("values of this size need more slots than the handle has (ncclLLA2ACalcSlots)",
                               (long long)sizeof(T), handle_.nSlots, comm_.rank);
  }
  template <typename T>
  GYRE_DEVICE_FN void put(gyre_device::LLLine* at, T data) const {
    constexpr int L = gyre_device::llLinesOf<T>();
    uint32_t words[L][2] = {};  // zero past a value whose size is not a multiple of 8
    memcpy(words, static_cast<const void*>(&data), sizeof(T));
    for (int v = 0; v < L; ++v) gyre_device::storeLine(at + v * pitch_, words[v][0], words[v][1], epoch_);
  }

  Coop coop_;
  ncclDevComm const& comm_;
  ncclTeam team_;
  ncclLLA2AHandle handle_;
  int pitch_;
  bool multimem_;
  size_t blockLine_ = 0;
  uint32_t epoch_ = 1;
};

#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_LL_A2A_H_ */
