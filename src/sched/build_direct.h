// Direct schedules: every rank talks to every rank over the mesh connections
// (one send and one receive connection per peer), so a collective takes one
// dependent hop whatever the rank count. They are the latency-optimal choice
// for small messages on one host: the ring's Broadcast is a chain of n-1 hops
// and its AllGather n-1 dependent steps, each a peer thread noticing a slot.
//
// Connection indices: peer p's send and receive connections sit at
// meshIndex(rank, p) (this rank left out). Peers are visited from rank+1
// upwards, wrapping, so no single peer is everyone's first.
#pragma once

#include <cstddef>

#include "src/sched/step.h"

namespace gyre {

inline int meshIndex(int rank, int peer) { return peer < rank ? peer : peer - 1; }

struct DirectShape {
  int rank;
  int nranks;
  size_t count;       // Broadcast, AllReduce: the message; AllGather, ReduceScatter: one rank's block
  size_t chunkElems;  // at most one FIFO slot
  int root;           // Broadcast
  bool inPlace;       // AllGather: the input already sits at output + rank*count
  // Single copy (build_single_copy.h): an owner whose buffer peers cannot
  // map sends the elements through the FIFO (kStepByValueIfPrivate), so
  // chunkElems must fit one slot. The reductions always do.
  bool byValueIfPrivate = false;
};

// The root sends each chunk to every rank; the others receive it from the root.
void buildDirectBroadcast(const DirectShape& shape, ChannelSchedule* out);
// Each rank sends its block to every rank and receives every rank's block
// into output block p (rank order).
void buildDirectAllGather(const DirectShape& shape, ChannelSchedule* out);
// One-shot AllReduce: each rank sends its input (pre-op'd) to every rank,
// then one kStepAllPeers step reduces all n inputs in rank order, so every
// rank computes the same bits in one hop (the ring takes 2(n-1) hops, the
// tree 2 log2 n, recursive doubling log2 n).
void buildDirectAllReduce(const DirectShape& shape, ChannelSchedule* out);
// One-shot ReduceScatter: each rank sends input block p to rank p, then
// reduces the n copies of its own block in rank order (the AllReduce's
// kStepAllPeers step over one block).
void buildDirectReduceScatter(const DirectShape& shape, ChannelSchedule* out);

}  // namespace gyre
