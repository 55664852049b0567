// Shared by the host planner tests: a host communicator's plan context and
// the plan of one float call of a given nccl-tests size.
#pragma once

#include <catch2/catch.hpp>

#include "src/plan/planner.h"

namespace gyre::testing {

// `ranks` host ranks with 4 ring channels and 512 KiB pipeline steps;
// `shm`: over shared memory with single copy allowed, else sockets.
inline PlanContext hostContext(int ranks, const TuningTable& t, bool shm) {
  PlanContext ctx;
  ctx.nranks = ranks;
  ctx.minChannels = 1;
  ctx.ringChannels = 4;
  ctx.slotBytes = 512 << 10;
  ctx.meshConnections = ranks > 2;
  ctx.singleCopy = shm;
  ctx.shmRings = shm;
  ctx.tuning = &t;
  return ctx;
}

// The plan of a float call of `bytes` as nccl-tests counts them.
inline Plan planFloats(const PlanContext& ctx, CollKind coll, size_t bytes) {
  Plan p;
  size_t count = bytes / 4;
  if (coll == CollKind::AllGather || coll == CollKind::ReduceScatter) count /= ctx.nranks;
  REQUIRE(planCollective(ctx, coll, count, 4, &p) == ncclSuccess);
  return p;
}

}  // namespace gyre::testing
