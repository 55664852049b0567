// The planner decides how a collective runs: algorithm, protocol, channels and
// chunk size. It knows nothing about where buffers live.
//
// Today: AllReduce uses the double binary tree for small messages on three or
// more ranks (2·log2(n) hops instead of the ring's 2(n-1)) and the ring
// otherwise; every other collective uses the ring (a chain for Broadcast and
// Reduce). NCCL_ALGO / NCCL_PROTO override with NCCL's syntax.
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

// Largest AllReduce (bytes) that takes the tree when NCCL_ALGO allows both.
constexpr size_t kTreeMaxBytes = 64 << 10;
// A ring collective uses another channel for every this many bytes.
constexpr size_t kMinBytesPerChannel = 512 << 10;

ncclResult_t planCollective(const ncclComm* comm, CollKind coll, size_t count, size_t typeSize, Plan* plan);

// Checks NCCL_ALGO / NCCL_PROTO against what this build can run (at init, so a
// bad value fails early and names the variable).
ncclResult_t validateAlgorithmSettings();

}  // namespace gyre
