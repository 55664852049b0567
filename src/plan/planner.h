// The planner decides how a collective runs: algorithm, protocol, channels and
// chunk size. It knows nothing about where buffers live. For now the only
// schedule is the ring with the Simple protocol on one channel; NCCL_ALGO and
// NCCL_PROTO are honoured (and rejected if they ask for what does not exist).
#pragma once

#include <cstddef>

#include "include/gyre.h"
#include "src/comm/coll_kind.h"
#include "src/plan/algorithm.h"

struct ncclComm;

namespace gyre {

struct Plan {
  Algorithm algorithm = Algorithm::Ring;
  Protocol protocol = Protocol::Simple;
  int nchannels = 1;
  size_t chunkElems = 0;  // elements per pipeline step
  size_t alignElems = 1;
};

ncclResult_t planCollective(const ncclComm* comm, CollKind coll, size_t count, size_t typeSize, Plan* plan);

// Checks NCCL_ALGO / NCCL_PROTO against what this build can run (at init, so a
// bad value fails early and names the variable).
ncclResult_t validateAlgorithmSettings();

}  // namespace gyre
