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

// Small messages on 2^k ranks: recursive doubling. In round j a rank sends
// its partial result to rank ^ 2^j (send and receive connection j) and
// reduces what comes back as op(lower rank's, higher rank's), so after k
// rounds every rank holds the same reduction, in the same operand order
// (bitwise identical, but a NaN from an arithmetic op may keep either payload:
// the compiler may commute an addition). Two ranks is one round: the ring's
// degenerate form in one step instead of two. Same bytes on the wire as the
// ring for 2 ranks, log2(n) rounds instead of the tree's 2 log2(n) hops, but
// n/2 times the ring's reduction work, so only for small messages.
void buildDoublingAllReduce(const RingAllReduceShape& shape, ChannelSchedule* out);

}  // namespace gyre
