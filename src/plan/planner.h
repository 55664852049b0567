// The planner decides how a collective runs: algorithm, protocol, channels and
// chunk size. It knows nothing about where buffers live.
//
// The algorithm comes from the communicator's tuning table (tuning.h): the
// cost model's fastest choice for this collective and size over the rings and
// trees the topology search built, within NCCL_ALGO; a tuner plugin, where
// one is loaded, may change that choice per call (tuner_steer.h). Only AllReduce has a tree
// schedule; the other collectives run their ring (a chain for Broadcast and
// Reduce). Host communicators of 3..8 ranks on one host also have Direct
// (src/sched/build_direct.h) for Broadcast, AllGather, AllReduce and
// ReduceScatter (one-shot), which the cost model picks for small messages. Small AllReduces on a power-of-two rank count use recursive
// doubling (unless NCCL_ALGO forces an algorithm; on 2 ranks it is the ring's
// one-step form and stays even then). Channels: one per minBytesPerChannel (host) or kMinBytesPerKernelChannel, between NCCL_MIN_NCHANNELS
// and the rings made at init.
#pragma once

#include <cstddef>

#include "include/gyre.h"
#include "src/call/coll_kind.h"
#include "src/plan/algorithm.h"
#include "src/plan/calibration.h"
#include "src/plan/host_thresholds.h"
#include "src/plan/tuning.h"

namespace gyre {

class TunerSession;

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

// Broadcast and AllGather from singleCopyByValueMinBytes run single copy
// by value where the owner's buffer is private: heap buffers go through the
// FIFO and gyreMemAllocHost buffers are read in place through the peers'
// mappings. Heap buffers are read by reference (process_vm_readv) from
// singleCopyByReferenceMinBytes, and at every size under
// GYRE_SINGLE_COPY=always: that pays only where the kernel's copy keeps up
// with the FIFO, which on some machines it does not (host_thresholds.h,
// docs/CALIBRATION.md).
inline bool singleCopyByValue(const HostThresholds& t, CollKind coll, size_t bytes) {
  return (coll == CollKind::AllGather || coll == CollKind::Broadcast) && bytes >= t.singleCopyByValueMinBytes &&
         bytes < t.singleCopyByReferenceMinBytes;
}

// Whether GYRE_SINGLE_COPY=auto runs `coll` of `bytes` (nccl-tests bytes)
// on `nranks` ranks as single copy.
inline bool singleCopyPays(const HostThresholds& t, CollKind coll, int nranks, size_t bytes) {
  switch (coll) {
    case CollKind::Broadcast:
    case CollKind::AllGather: return bytes >= t.singleCopyByValueMinBytes;
    case CollKind::AllReduce: return nranks == 2 && bytes >= t.singleCopyAllReduceMinBytes;
    case CollKind::ReduceScatter:
      return bytes >= t.singleCopyReduceScatterMinBytes &&
             (nranks == 2 || bytes <= t.singleCopyReduceScatterMeshMaxBytes);
    default: return false;
  }
}

// A host communicator of 3+ ranks runs AllReduces from
// twoChannelAllReduceMinBytes on two ring channels even where the size asks
// for one; shared memory and sockets keep the same channels, so a call's bits
// do not depend on the transport. Two host ranks over shared memory keep to
// NCCL_MIN_NCHANNELS: one thread per rank runs every channel's lane, so more
// channels add no copying core, only FIFOs that push each other out of the
// caches. The thresholds and where they come from: host_thresholds.h.

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
  // The communicator's tuner plugin session (tuner_plugin.h), or null: it
  // then has a say in every collective's plan (tuner_steer.h).
  const TunerSession* tuner = nullptr;
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
