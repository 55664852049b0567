// Ring AllReduce as steps: for each pipeline iteration over nranks*chunk
// elements, a reduce-scatter (n-1 steps) followed by an all-gather (n-1 steps).
#pragma once

#include <cstddef>

#include "src/sched/step.h"

namespace gyre {

struct RingAllReduceShape {
  int rank;
  int nranks;
  size_t offset;       // first element of the range this channel reduces
  size_t count;        // elements in that range
  size_t chunkElems;   // elements per step (FIFO slot)
  size_t alignElems;   // segment alignment
};

// Appends this rank's steps. The ring sends to conn 0 (next) and receives from
// conn 0 (prev). With one rank the result is a single local copy.
void buildRingAllReduce(const RingAllReduceShape& shape, ChannelSchedule* out);

// Two ranks, small messages: the ring's degenerate form in one step instead
// of two. Each rank sends its whole (pre-op'd) range to the other and reduces
// what it receives with its own, both as op(rank 0's, rank 1's), so the two
// results are bitwise identical. Same bytes on the wire as the ring, twice
// the reduction work, half the latency.
void buildExchangeAllReduce(const RingAllReduceShape& shape, ChannelSchedule* out);

}  // namespace gyre
