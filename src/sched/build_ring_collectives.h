// Ring (and chain) schedules for Broadcast, Reduce, AllGather and
// ReduceScatter. Like ring AllReduce, each sends to conn 0 (the next rank) and
// receives from conn 0 (the previous rank); steps carry at most chunkElems.
#pragma once

#include <cstddef>

#include "src/sched/step.h"

namespace gyre {

// `rank` and `root` are positions along the channel's ring (the ring search
// may order ranks differently from their numbers); `ringRanks[pos]` is the
// rank at each position, which owns the pos-th block of AllGather and
// ReduceScatter (nullptr: position == rank).
struct RingShape {
  int rank;
  int nranks;
  size_t count;       // per-rank count: the call's count (AllGather: sendcount, ReduceScatter: recvcount)
  size_t chunkElems;
  int root;           // Broadcast / Reduce
  bool inPlace;       // AllGather: input already sits at output + rank*count
  // The part of each count-element block this channel moves; channels split
  // the blocks into contiguous ranges.
  size_t rangeBegin;
  size_t rangeCount;
  const int* ringRanks = nullptr;
};

// The chain root -> root+1 -> ... -> root-1 forwards each chunk.
void buildRingBroadcast(const RingShape& shape, ChannelSchedule* out);
// The chain root+1 -> ... -> root reduces each chunk on its way to root.
void buildRingReduce(const RingShape& shape, ChannelSchedule* out);
// Output block r (count elements) holds rank r's input on every rank.
void buildRingAllGather(const RingShape& shape, ChannelSchedule* out);
// Rank r's output is block r of the reduction of every rank's input.
void buildRingReduceScatter(const RingShape& shape, ChannelSchedule* out);

}  // namespace gyre
