// The planner's large-message choices on host communicators: how many
// channels a ring collective uses, and where Broadcast and AllGather read
// the peers' buffers in place (single copy).
#include "src/config/env.h"
#include "src/plan/planner.h"
#include "tests/unit/plan_fixtures.h"
#include "tests/unit/topology_fixtures.h"

using namespace gyre;
using gyre::testing::hostContext;
using gyre::testing::planFloats;

namespace {

TuningTable hostTable(int ranks) {
  env::reloadForTesting("/nonexistent");
  topo::Placement p = topo::replicate(testing::loadShipped("ci_vm.xml"), 1, ranks);
  RingOptions opts;
  opts.minChannels = 4;
  RingPlan rings;
  REQUIRE(buildRings(p, opts, &rings) == ncclSuccess);
  TuningTable t;
  buildTuningTable(rings, ranks, true, false, &t);
  return t;
}



}  // namespace

TEST_CASE("2 host ranks over shared memory run large ring collectives on one channel, 4 ranks or sockets on several") {
  TuningTable two = hostTable(2), four = hostTable(4);
  for (size_t bytes : {size_t{2} << 20, size_t{8} << 20, size_t{64} << 20}) {
    INFO(bytes << " bytes");
    CHECK(planFloats(hostContext(2, two, true), CollKind::AllReduce, bytes).nchannels == 1);
    CHECK(planFloats(hostContext(2, two, true), CollKind::ReduceScatter, bytes).nchannels == 1);
    CHECK(planFloats(hostContext(2, two, false), CollKind::AllReduce, bytes).nchannels == 4);  // sockets
    CHECK(planFloats(hostContext(4, four, true), CollKind::AllReduce, bytes).nchannels == 4);
  }
  // 3+ ranks: two channels from 256 KiB, one below.
  CHECK(planFloats(hostContext(4, four, true), CollKind::AllReduce, 128 << 10).nchannels == 1);
  CHECK(planFloats(hostContext(4, four, true), CollKind::AllReduce, 256 << 10).nchannels == 2);
  CHECK(planFloats(hostContext(4, four, true), CollKind::AllReduce, 512 << 10).nchannels == 2);
  CHECK(planFloats(hostContext(4, four, false), CollKind::AllReduce, 512 << 10).nchannels == 2);  // sockets alike
  PlanContext atLeastTwo = hostContext(2, two, true);
  atLeastTwo.minChannels = 2;  // NCCL_MIN_NCHANNELS still holds
  CHECK(planFloats(atLeastTwo, CollKind::AllReduce, 8 << 20).nchannels == 2);
}

TEST_CASE("host Broadcast and AllGather run single copy by value from 8 KiB at every larger size and rank count "
          "(gyreMemAllocHost buffers read in place, heap buffers through the FIFO)") {
  TuningTable two = hostTable(2), four = hostTable(4);
  PlanContext ctx2 = hostContext(2, two, true), ctx4 = hostContext(4, four, true);
  for (const PlanContext* ctx : {&ctx2, &ctx4})
    for (CollKind coll : {CollKind::Broadcast, CollKind::AllGather}) {
      INFO(ctx->nranks << " ranks, " << collName(coll));
      CHECK_FALSE(planFloats(*ctx, coll, 4 << 10).singleCopy);  // Direct / the ring / the chain
      for (size_t bytes : {size_t{8} << 10, size_t{32} << 10, size_t{1} << 20, size_t{64} << 20, size_t{1} << 30}) {
        INFO(bytes << " bytes");
        Plan p = planFloats(*ctx, coll, bytes);
        CHECK(p.singleCopy);
        CHECK(p.singleCopyByValue);  // never process_vm_readv unless GYRE_SINGLE_COPY=always
      }
    }
  PlanContext always = ctx2;
  always.singleCopyAlways = true;
  CHECK(planFloats(always, CollKind::Broadcast, 64).singleCopy);
  CHECK_FALSE(planFloats(always, CollKind::Broadcast, 64 << 20).singleCopyByValue);
  PlanContext noProbe = ctx2;
  noProbe.singleCopy = false;  // the kernel forbade cross-memory attach
  CHECK_FALSE(planFloats(noProbe, CollKind::Broadcast, 64 << 20).singleCopy);
  CHECK_FALSE(planFloats(noProbe, CollKind::AllGather, 64 << 10).singleCopy);
}

TEST_CASE("single-copy reductions run where by value keeps up with the ring: 2-rank AllReduce from 1 MiB, "
          "ReduceScatter from 256 KiB, on 4 ranks only up to 2 MiB, never 4-rank AllReduce") {
  TuningTable two = hostTable(2), four = hostTable(4);
  PlanContext ctx2 = hostContext(2, two, true), ctx4 = hostContext(4, four, true);
  CHECK_FALSE(planFloats(ctx2, CollKind::AllReduce, 512 << 10).singleCopy);
  CHECK(planFloats(ctx2, CollKind::AllReduce, 1 << 20).singleCopy);
  CHECK(planFloats(ctx2, CollKind::AllReduce, 64 << 20).singleCopy);
  CHECK_FALSE(planFloats(ctx2, CollKind::ReduceScatter, 128 << 10).singleCopy);
  CHECK(planFloats(ctx2, CollKind::ReduceScatter, 256 << 10).singleCopy);
  CHECK(planFloats(ctx2, CollKind::ReduceScatter, 64 << 20).singleCopy);
  CHECK(planFloats(ctx4, CollKind::ReduceScatter, 256 << 10).singleCopy);
  CHECK(planFloats(ctx4, CollKind::ReduceScatter, 2 << 20).singleCopy);
  CHECK_FALSE(planFloats(ctx4, CollKind::ReduceScatter, 4 << 20).singleCopy);
  CHECK_FALSE(planFloats(ctx4, CollKind::AllReduce, 1 << 20).singleCopy);
  CHECK_FALSE(planFloats(ctx4, CollKind::AllReduce, 64 << 20).singleCopy);
  CHECK_FALSE(planFloats(ctx2, CollKind::Reduce, 64 << 20).singleCopy);
  PlanContext sockets = hostContext(2, two, false);  // no probe over sockets
  CHECK_FALSE(planFloats(sockets, CollKind::AllReduce, 64 << 20).singleCopy);
}

TEST_CASE("device kernels spread mid-size ring collectives over many channels (thread blocks)") {
  TuningTable four = hostTable(4);
  PlanContext ctx = hostContext(4, four, false);
  ctx.kernels = true;
  ctx.ringChannels = 21;
  CHECK(planFloats(ctx, CollKind::AllReduce, 8 << 10).nchannels == 1);
  CHECK(planFloats(ctx, CollKind::AllReduce, 128 << 10).nchannels == 8);
  CHECK(planFloats(ctx, CollKind::AllReduce, 2 << 20).nchannels == 21);
  CHECK(planFloats(hostContext(4, four, false), CollKind::AllReduce, 128 << 10).nchannels == 1);  // host threads: 1
}
