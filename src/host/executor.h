// The host executor: runs one channel's schedule on host memory, moving data
// through the channel's connection FIFOs. Type and op are resolved once per
// call into a template instance; the step loop itself has no virtual calls and
// no allocation.
#pragma once

#include <cstddef>

#include "include/gyre.h"
#include "src/comm/coll_kind.h"
#include "src/comm/comm.h"

namespace gyre {

// The arguments of one collective call, as the executor needs them.
struct CollCall {
  CollKind coll;
  const void* input;
  void* output;
  size_t count;
  ncclDataType_t datatype;
  ncclRedOp_t op;
  int root;
  uint64_t opCount;
};

ncclResult_t runHostSchedule(ncclComm* comm, const CollCall& call, Channel& channel,
                             const ChannelSchedule& schedule);

}  // namespace gyre
