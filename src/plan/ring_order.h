// Ring orders over ranks placed on a topology: the graph search half of the
// planner (what NCCL calls the ring graph). A pure function of the placement,
// so every rank computes the same rings without exchanging them.
//
// What a good ring is: each channel's ring is a cycle through every rank. Its
// edges follow topology paths, and edges of all channels compete for the same
// wires (each direction of a link, each NIC port). The search prefers, in
// order: the highest bandwidth this channel gets given what earlier channels
// already use; then the nearest path types (sum of NCCL levels over the
// edges, so a ring leaves NVLink or crosses a socket only when it must); then
// edges no earlier channel used (so channels differ where that costs nothing);
// then the lowest rank order (determinism). Across hosts a ring visits hosts in
// order, running through every local rank on each, entering and leaving
// through NICs chosen for port load and nearness to the entry/exit rank.
#pragma once

#include <vector>

#include "include/gyre.h"
#include "src/topology/placement.h"

namespace gyre {

struct RingOptions {
  int minChannels = 1;
  int maxChannels = 16;
  // GB/s one channel can move by itself: a GPU channel is one thread block
  // (about 24 GB/s on recent GPUs, which is why NCCL runs 16-32 channels over
  // NVLink); a host-memory channel is one copying thread (about 8 GB/s).
  // 0 picks by the kind of the ranks.
  double channelBw = 0;
};

// The fewest rings a host-memory communicator makes (NCCL_MAX_NCHANNELS
// permitting): one thread drives them all, but a second pipe keeps the
// neighbour busy while one is being reduced (measured faster than one).
constexpr int kHostMinChannels = 2;

struct RingChannel {
  std::vector<int> order;         // order[i] sends to order[i+1]; the last sends to order[0]
  std::vector<int> entryNic;      // per host: NIC node the ring arrives through (-1: one host, or no NIC)
  std::vector<int> exitNic;       // per host: NIC node the ring leaves through
};

struct RingPlan {
  std::vector<RingChannel> channels;
  double channelBw = 0;  // GB/s each channel gets once all channels share the wires
  double totalBw = 0;    // channels x channelBw: what one rank's ring traffic can reach
  double intraBw = 0;    // the same limit counting only wires inside hosts
  double netBw = 0;      // the same limit counting only NIC ports (0 on one host)
  topo::PathType worstIntra = topo::PathType::LOC;  // farthest path type of an edge inside a host
  int nhosts = 1;
};

// Fails (ncclInvalidArgument) only for an invalid placement.
ncclResult_t buildRings(const topo::Placement& p, const RingOptions& opts, RingPlan* out);

// Logs the plan at INFO under GRAPH: one line per channel.
void logRings(const topo::Placement& p, const RingPlan& plan);

// How many edges of a ring join ranks whose path is of type `t` (tests and
// gyre-info use this to show where rings cross slow links).
int countEdges(const topo::Placement& p, const std::vector<int>& order, topo::PathType t);

}  // namespace gyre
