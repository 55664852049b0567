// The point-to-point kernel's blocks (src/kernels/pair_copy_work.h), written
// once for CUDA (src/kernels/pair_copy_kernel.cu) and for the host emulation
// of the tests' fake CUDA runtime (tests/support/fake_cuda/host_emulation.cc),
// so CI runs this counting and these fences on several concurrent blocks.
// `Ctx` supplies what differs: the block's and thread's indices, the block
// barrier, flag loads and stores, a system-scope fence, the arrival count's
// atomic add, a clock and a pause.
//
// Every block takes part in every copy of the launch, a grid-stride loop of
// 16-byte vectors where both buffers allow it; thread 0 of each block does
// the block's flag work. Peers are ranks of this process on this GPU or on
// another GPU it reaches by peer access: the data may be written into the
// other GPU's memory and the flags read there, so the fences are
// system-scope (__threadfence_system), which orders this GPU's stores as
// every other agent sees them; a GPU-scope fence does not. The arrival
// count's atomics stay in the copying rank's own memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernels/pair_copy_work.h"
#include "src/kernels/primitives/host_device.h"
#include "src/kernels/primitives/shared_words.h"

namespace gyre {

// Blocks per launch: smaller batches take fewer, and at most kMaxBlocks per
// rank, as the ranks' kernels must all be resident at once.
constexpr unsigned kPairCopyMaxBlocks = 32;
constexpr uint64_t kPairCopyBytesPerBlock = uint64_t{1} << 20;

inline unsigned pairCopyBlocks(const PairCopyWork& w) {
  uint64_t bytes = 0;
  for (int i = 0; i < w.n; ++i) bytes = w.pairs[i].bytes > bytes ? w.pairs[i].bytes : bytes;
  const uint64_t blocks = bytes / kPairCopyBytesPerBlock;
  return blocks < 1 ? 1 : blocks > kPairCopyMaxBlocks ? kPairCopyMaxBlocks : static_cast<unsigned>(blocks);
}

// Until `flag` is set. False when the communicator was aborted, or this or
// an earlier wait of it timed out, first; a wait longer than w.timeoutNs
// stores the peer's rank + 1 in w.timedOut.
template <typename Ctx>
GYRE_HOST_DEVICE bool waitPairFlag(const Ctx& ctx, const uint32_t* flag, const PairCopyWork& w, int32_t peer) {
  const uint64_t start = ctx.nowNs();
  while (ctx.load(flag) == 0) {
    if (w.abort && loadSharedWord(w.abort)) return false;
    if (w.timedOut && loadSharedWord(w.timedOut)) return false;
    if (w.timeoutNs && ctx.nowNs() - start > w.timeoutNs) {
      if (w.timedOut) storeSharedWord(w.timedOut, static_cast<uint32_t>(peer + 1));
      return false;
    }
    ctx.pause();
  }
  ctx.fence();
  return true;
}

struct alignas(16) PairVector {
  uint64_t lo, hi;
};

// This thread's share of one copy: 16-byte vectors when both buffers are
// aligned, then bytes for the tail (or all of it when they are not).
template <typename Ctx>
GYRE_HOST_DEVICE void copyPairPart(const Ctx& ctx, const PairCopy& p) {
  const size_t first = ctx.block() * ctx.nthreads() + ctx.tid();
  const size_t stride = ctx.blocks() * ctx.nthreads();
  size_t done = 0;
  if (((reinterpret_cast<uintptr_t>(p.src) | reinterpret_cast<uintptr_t>(p.dst)) & 15) == 0) {
    const size_t vectors = p.bytes / 16;
    const PairVector* s = static_cast<const PairVector*>(p.src);
    PairVector* d = static_cast<PairVector*>(p.dst);
    for (size_t i = first; i < vectors; i += stride) d[i] = s[i];
    done = vectors * 16;
  }
  const unsigned char* s = static_cast<const unsigned char*>(p.src);
  unsigned char* d = static_cast<unsigned char*>(p.dst);
  for (size_t i = done + first; i < p.bytes; i += stride) d[i] = s[i];
}

// One block of the launch. The first side's ready flags are raised by block
// 0; for each second-side pair every block waits for ready, copies its part,
// and the block that arrives last clears ready and the count, then raises
// done; block 0 finally waits for done of the first-side pairs and clears it.
template <typename Ctx>
GYRE_HOST_DEVICE void runPairCopyBlock(const Ctx& ctx, const PairCopyWork& w) {
  if (ctx.block() == 0 && ctx.leader())
    for (int i = 0; i < w.n; ++i)
      if (w.pairs[i].role == PairRole::kFirst) ctx.store(&w.pairs[i].flags->ready, 1);
  for (int i = 0; i < w.n; ++i) {
    const PairCopy& p = w.pairs[i];
    if (p.role != PairRole::kSecond) continue;
    // The leader's verdict, for the whole block (the others agree with true).
    bool go = true;
    if (ctx.leader()) go = waitPairFlag(ctx, &p.flags->ready, w, p.peer);
    if (!ctx.allAgree(go)) return;
    copyPairPart(ctx, p);
    ctx.sync();
    if (ctx.leader()) {
      ctx.fence();  // this block's part before its arrival
      if (ctx.arrive(p.arrived) == ctx.blocks() - 1) {
        ctx.store(&p.flags->ready, 0);
        ctx.store(p.arrived, 0);
        ctx.fence();  // every block's part (each fenced before arriving) before done
        ctx.store(&p.flags->done, 1);
      }
    }
  }
  if (ctx.block() == 0 && ctx.leader())
    for (int i = 0; i < w.n; ++i)
      if (w.pairs[i].role == PairRole::kFirst) {
        if (!waitPairFlag(ctx, &w.pairs[i].flags->done, w, w.pairs[i].peer)) return;
        ctx.store(&w.pairs[i].flags->done, 0);
      }
}

}  // namespace gyre
