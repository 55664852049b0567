// The planner's thresholds that were fitted on hardware rather than derived:
// one table, each value with what it decides and where it was measured. The
// planner (planner.h) and the cost model (cost_model.cc) read them from here.
// docs/CALIBRATION.md says how each was measured and how to refit one.
//
// The host thresholds below are defaults: host_thresholds.cc starts from them,
// replaces the ones a CPU fact moves (the ReduceScatter mesh limit scales with
// the L2; Intel reads heap Broadcast/AllGather buffers by process_vm_readv
// from 1 MiB) and lets an environment variable per threshold win (gyre-info
// prints each value and why).
//
// Machines: "2-vCPU VM" is a 2-core development VM (Debian 12); "H100" is
// one NVIDIA H100 80GB HBM3. Ratios are time ratios of the ring (or the named
// alternative) over the chosen path, median of interleaved runs, out of
// place unless said.
//
//   constant                           value    decides                                        measured
//   kSingleCopyAllReduceMinBytes       1 MiB    2-rank AllReduce reduces from peers' buffers   2-vCPU VM: by value even with the ring
//                                               (GYRE_SINGLE_COPY=auto)                        from 1 MiB (0.93-1.08x), by reference 1.3-1.7x
//   kSingleCopyReduceScatterMinBytes   256 KiB  ReduceScatter single copy from this size       2-vCPU VM: 2 ranks by value even at 256 KiB-64 MiB,
//                                                                                              by reference 1.5-3.8x
//   kSingleCopyReduceScatterMeshMaxBytes 2 MiB  ...and on 3..8 ranks only up to this size      2-vCPU VM: 4 ranks by value 1.4-1.5x at 256 KiB-1 MiB,
//                                                                                              0.74-0.87x from 4 MiB
//   kSingleCopyByValueMinBytes         8 KiB    Broadcast/AllGather single copy (heap buffers  2-vCPU VM: 2 ranks even at 8-32 KiB; 4-rank AllGather
//                                               by value, shareable ones in place)             0.87-1.15x Direct; in place 2.6x (2 ranks, 8 KiB)
//   kStreamingStoresMinBytes           16 MiB   host copies into a call's output use streaming 2-vCPU VM (32 MiB L3): 2-rank AllGather 1.2-1.3x at
//                                               stores from this size (half the L3 if known)   16-64 MiB out of place, 0.75-0.9x at 1-4 MiB
//   kPairAllGatherPiecesPerSlot        4        2-rank AllGather by value sends pieces of a    2-vCPU VM: heap buffers 1.1-1.6x at 512 KiB-32 MiB
//                                               quarter slot (the FIFO cycles through 1 MiB)   against whole slots; gyreMemAllocHost ones 0.8-1.0x
//   kTwoChannelAllReduceMinBytes       256 KiB  3+ host ranks use two ring channels            2-vCPU VM: 4 ranks shm 1.5x at 256 KiB, 2.1x at 512 KiB;
//                                                                                              sockets 1.6-2.0x at 256 KiB
//   kDoublingMaxBytes                  64 KiB   largest AllReduce by recursive doubling        2-vCPU VM, 2 ranks: even at 64 KiB, ring ahead from 128 KiB
//   kOneShotMaxBytesOverDoubling       512 B    one-shot beats doubling on 4, 8 ranks up to    2-vCPU VM, 4 ranks: 1.1-1.6x at 32-512 B, 0.78x at 2 KiB
//   kMinBytesPerChannel                512 KiB  host rings: one more channel per this many B   not fitted; 2 host ranks over shm keep one channel
//                                                                                              (2-vCPU VM: 1.2-1.75x faster at 2-16 MiB)
//   kMinBytesPerKernelChannel          16 KiB   device kernels: one channel (block) per this   H100, 2 ranks: 128/512 KiB 74/243 us on 1 channel,
//                                                                                              28/49 us on 8
//   kHostBaseUs, host hop (cost_model) 1.0, 3.5 us  host Tree/Ring crossover                   2-vCPU VM: 4 ranks cross at 64 KiB
//   kDirectExtraPostUs                 0.5 us   Direct: cost of each further post (shm)        guessed from the ~0.3 us inline step; moves the crossover
//   kDirectExtraPostSocketUs           4.0 us   ...over sockets (Broadcast)                    2-vCPU VM: 4-rank 8 B-32 KiB Broadcast 2-5x faster as a chain
//   kDirectExtraPostSocketGatherUs     1.0 us   ...over sockets (AllGather, ReduceScatter)     2-vCPU VM: 4 ranks 1.1-1.4x faster Direct at 32 B-32 KiB,
//                                                                                              3 ranks within 5 %
//   kDirectGatherSlope                 1.5      Direct AllGather bandwidth penalty             2-vCPU VM, bench/compare: ring ahead above a few 100 KiB
//   kDirectBroadcastShmSlope           0.6      Direct Broadcast over shm: share of root writes 2-vCPU VM, 4 ranks: 1.1-1.2x the chain at 32-64 KiB
#pragma once

#include <cstddef>

namespace gyre {

// Single copy (build_single_copy.h) under GYRE_SINGLE_COPY=auto. The plan
// cannot know whether a peer's buffer is shareable, so each threshold is
// where the by-value form (heap buffers through the FIFO) stops losing to
// the ring; shareable buffers then gain the in-place read.
constexpr size_t kSingleCopyAllReduceMinBytes = 1 << 20;
constexpr size_t kSingleCopyReduceScatterMinBytes = 256 << 10;
// Past this, n-1 FIFOs per rank outgrow the caches on 3..8 ranks.
constexpr size_t kSingleCopyReduceScatterMeshMaxBytes = 2 << 20;
constexpr size_t kSingleCopyByValueMinBytes = 8 << 10;

// A 2-rank AllGather by value moves each piece through the FIFO twice (into
// the slot, out of it) while both ranks also write an output of the call's
// size: pieces of a quarter slot keep the FIFO's share of the caches to a
// quarter. Only AllGather: in-place Broadcast at 8 MiB ran 1.5x slower with
// quarter-slot steps, and 4-rank AllGathers wait once per piece on
// oversubscribed ranks. Every rank derives it from the agreed slot size.
constexpr size_t kPairAllGatherPiecesPerSlot = 4;

// Host lanes copy into the call's output with streaming stores from this call
// size (src/host/streaming_copy.h) where the L3 size is unknown; with it
// known, host_thresholds.cc takes half the L3.
constexpr size_t kStreamingStoresMinBytes = 16 << 20;

// Channels of host rings.
constexpr size_t kTwoChannelAllReduceMinBytes = 256 << 10;
constexpr size_t kMinBytesPerChannel = 512 << 10;
// Device kernels: a channel is a thread block whose every step costs a
// handshake, so mid sizes want many blocks.
constexpr size_t kMinBytesPerKernelChannel = 16 << 10;

// Small AllReduce: recursive doubling up to this size (latency rules below
// it; above it the extra reduction work costs more than the steps it saves).
constexpr size_t kDoublingMaxBytes = 64 << 10;
// On 4 and 8 ranks one-shot (Direct) reduces n inputs on every rank and beats
// doubling only up to this size.
constexpr size_t kOneShotMaxBytesOverDoubling = 512;

// Cost model (cost_model.cc), microseconds and factors.
constexpr double kHostBaseUs = 1.0;
constexpr double kHostHopUs = 3.5;
constexpr double kDirectExtraPostUs = 0.5;
constexpr double kDirectExtraPostSocketUs = 4.0;
constexpr double kDirectExtraPostSocketGatherUs = 1.0;
constexpr double kDirectGatherSlope = 1.5;
constexpr double kDirectBroadcastShmSlope = 0.6;

}  // namespace gyre
