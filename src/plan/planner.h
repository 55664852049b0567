// The planner decides how a collective runs: algorithm, protocol, channels and
// chunk size. It knows nothing about where buffers live.
//
// The algorithm comes from the communicator's tuning table (tuning.h): the
// cost model's fastest choice for this collective and size over the rings and
// trees the topology search built, within NCCL_ALGO. Only AllReduce has a tree
// schedule; the other collectives run their ring (a chain for Broadcast and
// Reduce). Host communicators of 3..8 ranks on one host also have Direct
// (src/sched/build_direct.h) for Broadcast, AllGather, AllReduce and
// ReduceScatter (one-shot), which the cost model picks for small messages. Small AllReduces on a power-of-two rank count use recursive
// doubling (unless NCCL_ALGO forces an algorithm; on 2 ranks it is the ring's
// one-step form and stays even then). Channels: one per kMinBytesPerChannel, between NCCL_MIN_NCHANNELS
// and the rings made at init.
#pragma once

#include <cstddef>

#include "include/gyre.h"
#include "src/call/coll_kind.h"
#include "src/plan/algorithm.h"
#include "src/plan/tuning.h"

namespace gyre {

struct Plan {
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::Simple;
  int nchannels = 1;
  size_t chunkElems = 0;  // elements per pipeline step
  size_t alignElems = 1;
  // Small AllReduce by recursive doubling (buildDoublingAllReduce): on 2
  // ranks over the ring's connections in place of the ring, on 4, 8, ...
  // ranks over the doubling connections in place of the tree.
  bool doubling = false;
  // Broadcast / AllGather reading the peers' buffers in place, AllReduce /
  // ReduceScatter reducing from them (build_single_copy.h), over the ring
  // pair (2 ranks) or the mesh.
  bool singleCopy = false;
  // Broadcast / AllGather single copy with GYRE_SINGLE_COPY=auto: an owner
  // whose buffer peers cannot map sends by value through the FIFO, so heap
  // buffers keep the two-copy cost and only gyreMemAllocHost ones are read
  // in place (kStepByValueIfPrivate).
  bool singleCopyByValue = false;
};

// The single-copy reductions (build_single_copy.h) read a peer's input in
// place where its buffer is shareable (gyreMemAllocHost) and take it by
// value through the FIFO otherwise; the plan cannot know which (it is per
// rank), so it picks them only where by value does not lose to the ring.
// 2-rank AllReduce: by value even with the ring from 1 MiB (0.93-1.08x,
// median of 3 interleaved runs), by reference 1.3-1.7x out of place, even
// in place to 16 MiB, 1.3x at 64 MiB, behind in place at 64-256 KiB.
constexpr size_t kSingleCopyAllReduceMinBytes = 1 << 20;
// ReduceScatter (bytes of the whole input): 2 ranks by value even with the
// ring at 256 KiB-64 MiB, by reference 1.5-3.8x; 4 ranks by value 1.4-1.5x
// the ring at 256 KiB-1 MiB but 0.74-0.87x from 4 MiB (n-1 FIFOs a rank
// outgrow the caches), so on 3..8 ranks only up to 2 MiB. 3..8-rank
// AllReduce by value is 0.83-0.90x the ring from 4 MiB (by reference
// 1.2-1.9x): only with GYRE_SINGLE_COPY=always.
constexpr size_t kSingleCopyReduceScatterMinBytes = 256 << 10;
constexpr size_t kSingleCopyReduceScatterMeshMaxBytes = 2 << 20;

// From this size Broadcast and AllGather run single copy by value where the
// owner's buffer is private (singleCopyByValue): heap buffers go through the
// FIFO, at what the ring or Direct schedules cost (s13, median of 7
// interleaved runs: 2 ranks even at 8-32 KiB, 4-rank AllGather 0.87-1.15x
// the tuned Direct at 8-32 KiB), and gyreMemAllocHost buffers are read in
// place through the peers' mappings (2 ranks 2.6x at 8 KiB, 4 ranks 1.5x at
// 32 KiB).
//
// Heap buffers are not read by reference (process_vm_readv) at any size
// unless GYRE_SINGLE_COPY=always. That pays only where the kernel's copy
// keeps up with memcpy. On session s13's VM it beat the FIFO from 16 KiB
// (2-rank AllGather) and 32 KiB (Broadcast). On session s15's (2 vCPUs of an
// AMD EPYC) a lone process_vm_readv copied at 36-67 % of memcpy's rate
// (64 KiB-16 MiB pieces of a 32 MiB buffer; 21-41 % of a 4 MiB one, in
// cache). By value through the FIFO against by reference, median of 3
// interleaved runs, time ratios: 2-rank AllGather 1.1-3.6x at 16-256 KiB,
// even at 1 MiB, 1.3x at 4 MiB, 1.8-3x at 16-64 MiB (one earlier run had
// the reads 1.1-1.4x ahead of the ring at 1-4 MiB); 4-rank AllGather
// 1.5-3.3x at 128 KiB-1 MiB, even at 2-32 MiB out of place; 2-rank
// Broadcast 1.2-3.3x at 32-256 KiB, even at 512 KiB-8 MiB, 1.3-2x at
// 64 MiB; 4-rank Broadcast 1.3-3.2x at 32 KiB-8 MiB, 1.1x at 16-64 MiB
// (three readers pin the root's pages). By value gives up the 2-rank
// Broadcast split of GYRE_SINGLE_COPY=always, where the root writes a third
// of each piece into the reader's output: with gyreMemAllocHost buffers that
// was 1.3x faster in place at 2-32 MiB and 1.4-1.6x slower out of place.
constexpr size_t kSingleCopyByValueMinBytes = 8 << 10;
inline bool singleCopyByValue(CollKind coll, size_t bytes) {
  return (coll == CollKind::AllGather || coll == CollKind::Broadcast) && bytes >= kSingleCopyByValueMinBytes;
}

// Whether GYRE_SINGLE_COPY=auto runs `coll` of `bytes` (nccl-tests bytes)
// on `nranks` ranks as single copy.
inline bool singleCopyPays(CollKind coll, int nranks, size_t bytes) {
  switch (coll) {
    case CollKind::Broadcast:
    case CollKind::AllGather: return singleCopyByValue(coll, bytes);
    case CollKind::AllReduce: return nranks == 2 && bytes >= kSingleCopyAllReduceMinBytes;
    case CollKind::ReduceScatter:
      return bytes >= kSingleCopyReduceScatterMinBytes && (nranks == 2 || bytes <= kSingleCopyReduceScatterMeshMaxBytes);
    default: return false;
  }
}

// Smallest AllReduce that a host communicator of 3+ ranks runs on two ring
// channels even where the size asks for one (512 KiB a channel): median of
// 5 interleaved runs on 2 cores, 4 ranks over shared memory 1.5x at 256 KiB
// and 2.1x at 512 KiB, 3 ranks 1.5x at 512 KiB, even at 64-128 KiB; over
// sockets 1.6-2.0x at 256 KiB. A ReduceScatter on two channels was 0.9x at
// 128 KiB. Shared memory and sockets keep the same channels, so a call's
// bits do not depend on the transport.
constexpr size_t kTwoChannelAllReduceMinBytes = 256 << 10;

// Largest AllReduce run by recursive doubling: below it latency rules (log2 n
// rounds instead of 2(n-1) ring steps or 2 log2 n tree hops); above it the
// doubling's extra reduction work costs more than the steps it saves
// (2 ranks, measured: even at 64 KiB, the ring ahead from 128 KiB).
constexpr size_t kDoublingMaxBytes = 64 << 10;

// On 4 and 8 ranks the cost model's one-shot (Direct) AllReduce, which it
// weighs against the tree, competes with recursive doubling (log2 n rounds,
// not in the model); one-shot reduces n inputs on every rank and wins only up
// to this size (4 ranks on 2 cores, median of 7 interleaved runs: 1.1-1.6x
// the doubling at 32-512 B, 0.78x at 2 KiB). On 3 ranks it beats the tree to
// 8 KiB and more (1.5-2.6x), where the model puts the crossover at 16 KiB.
constexpr size_t kOneShotMaxBytesOverDoubling = 512;

// A ring collective uses another channel for every this many bytes.
constexpr size_t kMinBytesPerChannel = 512 << 10;
// Except on 2 host ranks over shared memory, which keep to NCCL_MIN_NCHANNELS
// (1): one thread per rank runs every channel's lane, so more channels add
// no copying core, only FIFOs that push each other out of the caches (2-rank
// AllReduce 2-16 MiB 1.2-1.6x, ReduceScatter 4 MiB 1.75x faster on one
// channel, best of 7 interleaved runs; 4 ranks on 2 cores keep more
// channels, which let a rank work while a peer waits for a core).
// Device kernels: a channel is a thread block, whose steps each cost a
// handshake, so mid sizes want many blocks. On an H100 (2 ranks in one
// process, before the loops kept several loads in flight) 128 KiB and 512 KiB
// AllReduce took 74 and 243 us on the 1 channel kMinBytesPerChannel gives, 28 and
// 49 us on 8 forced channels (docs/GPU-RESULTS.md).
constexpr size_t kMinBytesPerKernelChannel = 16 << 10;

// A call's size as nccl-tests counts it (and the cost model takes it):
// AllGather's gathered output, ReduceScatter's input, else one rank's buffer.
inline size_t collectiveBytes(CollKind coll, size_t count, size_t typeSize, int nranks) {
  bool perRankCount = coll == CollKind::AllGather || coll == CollKind::ReduceScatter;
  return count * typeSize * (perRankCount ? static_cast<size_t>(nranks) : 1);
}

// What the planner decides from besides the call: facts of the communicator,
// fixed once init has made its rings, trees and tuning table.
struct PlanContext {
  int nranks = 1;
  int minChannels = 1;             // NCCL_MIN_NCHANNELS, at most ringChannels
  int ringChannels = 1;            // rings made at init
  size_t slotBytes = 0;            // one pipeline step: NCCL_BUFFSIZE / kFifoSlots
  bool kernels = false;            // device kernels run it (the only executor with LL)
  bool trees = false;              // the double binary tree is connected
  bool doublingConnections = false;  // recursive doubling's connections exist (4, 8, ... ranks)
  bool meshConnections = false;      // every rank to every rank (the Direct algorithms)
  bool singleCopy = false;           // ranks may read each other's buffers (process_vm_readv)
  bool singleCopyAlways = false;     // GYRE_SINGLE_COPY=always: at every size
  bool shmRings = false;             // host ranks whose rings run over shared memory (one host thread per rank)
  const TuningTable* tuning = nullptr;
};

// A call's own algorithm selection (CollCall::allowedAlgorithms, from a
// per-call config): empty lets the tuning table choose.
struct CallSelection {
  unsigned char allowed = 0;  // bits 1 << int(Algorithm)
  bool required = true;       // a selection that cannot run here is an error
};

ncclResult_t planCollective(const PlanContext& ctx, CollKind coll, size_t count, size_t typeSize, Plan* plan,
                            CallSelection selection = {});

// Checks NCCL_ALGO / NCCL_PROTO against what this build can run (at init, so a
// bad value fails early and names the variable).
ncclResult_t validateAlgorithmSettings();

}  // namespace gyre
