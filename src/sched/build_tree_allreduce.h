// Tree AllReduce as two lanes per tree: the up lane reduces each chunk from
// the children into this rank and passes it to the parent; the down lane
// receives the finished chunk from the parent and forwards it to the children.
// The lanes run concurrently, so chunk i+1 climbs while chunk i descends. At
// the root both halves are one lane (a chunk goes down as soon as it is
// reduced). Connection indices: up lane sends to conn 0 (parent) and receives
// from conn i (child i); down lane receives from conn 0 (parent) and sends to
// conn i (child i).
#pragma once

#include <cstddef>

#include "src/sched/step.h"

namespace gyre {

struct TreeAllReduceShape {
  bool hasParent;
  int nchildren;
  size_t offset;      // first element this tree carries
  size_t count;       // elements this tree carries
  size_t chunkElems;
};

void buildTreeAllReduce(const TreeAllReduceShape& shape, ChannelSchedule* up, ChannelSchedule* down);

}  // namespace gyre
