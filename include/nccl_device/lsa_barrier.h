/* nccl_device/lsa_barrier.h — a barrier over the LSA team, run by a group
 * of threads (a Coop) on every rank: arrive() tells every peer this rank
 * got here, wait() waits until every peer got here, sync() is both.
 *
 * Barrier `index` of a set (the device communicator's own, or one made by
 * ncclLsaBarrierCreateRequirement for a team) owns, on every rank, one word
 * per team rank in the communicator's resource window (an inbox) and one
 * word counting the barrier's rounds (its epoch). Arriving stores the next
 * epoch into this rank's word of every peer's inbox; waiting watches this
 * rank's inbox until every word holds it. Only one rank ever writes a given
 * word, and epochs only grow, so no word needs resetting and a late reader
 * cannot miss a round (comparisons are wrap-safe).
 *
 * With a release order arrive() makes this group's earlier writes visible
 * to the peers before they can see the arrival; with an acquire order
 * wait() makes the peers' writes before their arrival visible to this
 * group. A relaxed barrier only orders execution. */
#ifndef GYRE_NCCL_DEVICE_LSA_BARRIER_H_
#define GYRE_NCCL_DEVICE_LSA_BARRIER_H_

#include "coop.h"

#ifdef __cplusplus
extern "C" {
#endif
/* A requirement for nBarriers barriers over `team`, and the handle naming
 * them (its bufHandle is filled by ncclDevCommCreate). */
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
                                             ncclDevResourceRequirements_t* outReq);
#ifdef __cplusplus
} /* extern "C" */

#if defined(__CUDACC__) || (defined(__has_include) && __has_include(<cuda/atomic>))
#include <cuda/atomic>
#else
/* A host-only build without CUDA's libcu++: the orders device-API calls
 * name, with libcu++'s spelling. */
namespace cuda {
enum memory_order {
  memory_order_relaxed,
  memory_order_consume,
  memory_order_acquire,
  memory_order_release,
  memory_order_acq_rel,
  memory_order_seq_cst
};
}  // namespace cuda
#endif

#if !defined(__CUDA_ARCH__)
#include <chrono>
#include <thread>
#endif

namespace gyre_device {

GYRE_DEVICE_FN bool releases(cuda::memory_order o) {
  return o == cuda::memory_order_release || o == cuda::memory_order_acq_rel || o == cuda::memory_order_seq_cst;
}
GYRE_DEVICE_FN bool acquires(cuda::memory_order o) {
  return o == cuda::memory_order_acquire || o == cuda::memory_order_consume || o == cuda::memory_order_acq_rel ||
         o == cuda::memory_order_seq_cst;
}

/* Word stores and loads visible across GPUs and processes (system scope). */
GYRE_DEVICE_FN void storeWord(uint32_t* p, uint32_t v, bool release) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> a(*p);
  a.store(v, release ? cuda::memory_order_release : cuda::memory_order_relaxed);
#else
  if (release)
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
  else
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
#endif
}
GYRE_DEVICE_FN uint32_t loadWord(uint32_t* p, bool acquire) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<uint32_t, cuda::thread_scope_system> a(*p);
  return a.load(acquire ? cuda::memory_order_acquire : cuda::memory_order_relaxed);
#else
  return acquire ? __atomic_load_n(p, __ATOMIC_ACQUIRE) : __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}
GYRE_DEVICE_FN bool reached(uint32_t seen, uint32_t target) { return int32_t(seen - target) >= 0; }

/* The words of nBarriers barriers over a team of nRanks: nBarriers epoch
 * words, then nBarriers inboxes of nRanks words (word p: from team rank p). */
GYRE_DEVICE_FN constexpr size_t lsaBarrierWords(int nBarriers, int nRanks) {
  return size_t(nBarriers) * (1 + size_t(nRanks));
}

/* A clock for timeouts: the SM's cycle counter on the device; on the host
 * nanoseconds, so a test's timeout reads as roughly the same span. */
GYRE_DEVICE_FN uint64_t cycles() {
#if defined(__CUDA_ARCH__)
  return uint64_t(clock64());
#else
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
#endif
}
GYRE_DEVICE_FN void pause() {
#if !defined(__CUDA_ARCH__)
  std::this_thread::yield();
#endif
}

}  // namespace gyre_device

template <typename Coop>
struct ncclLsaBarrierSession {
  GYRE_DEVICE_FN ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeam team, ncclLsaBarrierHandle handle,
                                       uint32_t index, bool multimem = false, ncclMultimemHandle mmHandle = {})
      : coop_(coop), comm_(comm), team_(team), handle_(handle), index_(index) {
    (void)multimem;  // no multimem: the unicast barrier serves both
    (void)mmHandle;
    epoch_ = gyre_device::loadWord(epochWord(), false);
  }
  GYRE_DEVICE_FN ncclLsaBarrierSession(Coop coop, ncclDevComm const& comm, ncclTeamTagLsa, uint32_t index,
                                       bool multimem = false)
      : ncclLsaBarrierSession(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index, multimem) {}
  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;

  /* The rounds this session ran carry over to the next session of the
   * same barrier (in this kernel or a later one). */
  GYRE_DEVICE_FN ~ncclLsaBarrierSession() {
    coop_.sync();
    if (coop_.thread_rank() == 0) gyre_device::storeWord(epochWord(), epoch_, false);
    coop_.sync();
  }

  GYRE_DEVICE_FN void arrive(Coop, cuda::memory_order order) {
    coop_.sync();  // the whole group's earlier work precedes the arrival
    const uint32_t next = epoch_ + 1;
    for (int p = coop_.thread_rank(); p < team_.nRanks; p += coop_.size())
      gyre_device::storeWord(inbox(p, team_.rank), next, gyre_device::releases(order));
  }
  GYRE_DEVICE_FN void wait(Coop coop, cuda::memory_order order) {
    (void)wait(coop, order, 0);
  }
  GYRE_DEVICE_FN void sync(Coop coop, cuda::memory_order order) {
    arrive(coop, order);
    wait(coop, order);
  }
  /* As wait() and sync(), giving up after `timeoutCycles` (0: never) with
   * ncclTimeout, which every thread of the group then returns alike; the
   * barrier is then unusable. */
  GYRE_DEVICE_FN ncclResult_t wait(Coop, cuda::memory_order order, uint64_t timeoutCycles) {
    const uint32_t next = epoch_ + 1;
    const uint64_t start = gyre_device::cycles();
    bool late = false;
    for (int p = coop_.thread_rank(); p < team_.nRanks && !late; p += coop_.size()) {
      uint32_t* word = inbox(team_.rank, p);
      while (!gyre_device::reached(gyre_device::loadWord(word, gyre_device::acquires(order)), next)) {
        if (timeoutCycles != 0 && gyre_device::cycles() - start > timeoutCycles) {
          late = true;
          break;
        }
        gyre_device::pause();
      }
    }
    coop_.sync();
    if (timeoutCycles != 0) {
      /* Each thread watched its own peers against its own clock: one may have
       * given up while another saw all of its peers arrive. The group must
       * agree on one result and one epoch, so thread 0 looks at every word
       * once more (epochs only grow: what it sees reached stays reached) and
       * passes its verdict through the epoch word, which no one reads during
       * a session (the constructor and destructor do). */
      if (coop_.thread_rank() == 0) {
        bool all = true;
        for (int p = 0; p < team_.nRanks && all; ++p)
          all = gyre_device::reached(gyre_device::loadWord(inbox(team_.rank, p), gyre_device::acquires(order)), next);
        gyre_device::storeWord(epochWord(), all ? next : epoch_, false);
      }
      coop_.sync();
      late = gyre_device::loadWord(epochWord(), false) != next;
      coop_.sync();  /* every thread has the verdict before the word is written again */
    }
    if (late) return ncclTimeout;
    epoch_ = next;
    return ncclSuccess;
  }
  GYRE_DEVICE_FN ncclResult_t sync(Coop coop, cuda::memory_order order, uint64_t timeoutCycles) {
    arrive(coop, order);
    return wait(coop, order, timeoutCycles);
  }

 private:
  /* Resource memory of the barriers, on every rank: see lsaBarrierWords. */
  GYRE_DEVICE_FN uint32_t* epochWord() const {
    return static_cast<uint32_t*>(ncclGetResourceBufferLocalPointer(comm_, handle_.bufHandle)) + index_;
  }
  /* The word of `owner`'s inbox that team rank `from` writes. */
  GYRE_DEVICE_FN uint32_t* inbox(int owner, int from) const {
    uint32_t* base = static_cast<uint32_t*>(ncclGetResourceBufferPeerPointer(comm_, handle_.bufHandle, team_, owner));
    return base + handle_.nBarriers + size_t(index_) * size_t(team_.nRanks) + size_t(from);
  }

  Coop coop_;
  ncclDevComm const& comm_;
  ncclTeam team_;
  ncclLsaBarrierHandle handle_;
  uint32_t index_;
  uint32_t epoch_ = 0;
};

#endif /* __cplusplus */

#endif /* GYRE_NCCL_DEVICE_LSA_BARRIER_H_ */
