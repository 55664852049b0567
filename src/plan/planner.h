// The planner decides how a collective runs: algorithm, protocol, channels and
// chunk size. It knows nothing about where buffers live.
//
// The algorithm comes from the communicator's tuning table (tuning.h): the
// cost model's fastest choice for this collective and size over the rings and
// trees the topology search built, within NCCL_ALGO. Only AllReduce has a tree
// schedule; the other collectives run their ring (a chain for Broadcast and
// Reduce). A small ring AllReduce of two ranks runs as one exchange. Channels: one per kMinBytesPerChannel, between NCCL_MIN_NCHANNELS
// and the rings made at init.
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
  bool exchange = false;  // ring AllReduce of 2 ranks as one exchange step (buildExchangeAllReduce)
};

// Largest 2-rank ring AllReduce run as one exchange: below it latency rules
// (one step instead of two); above it the exchange's doubled reduction work
// costs more than the step it saves.
constexpr size_t kExchangeMaxBytes = 64 << 10;

// A ring collective uses another channel for every this many bytes.
constexpr size_t kMinBytesPerChannel = 512 << 10;

ncclResult_t planCollective(const ncclComm* comm, CollKind coll, size_t count, size_t typeSize, Plan* plan);

// Checks NCCL_ALGO / NCCL_PROTO against what this build can run (at init, so a
// bad value fails early and names the variable).
ncclResult_t validateAlgorithmSettings();

}  // namespace gyre
