// A per-call algorithm selection (ncclCollConfig_t.algSelection, carried as
// CallSelection) decides the plan's algorithm over the tuning table's pick:
// the allowed algorithm runs where it can, a required selection that cannot
// run is refused naming it, an optional one falls back to the table, and a
// selected call has no doubling or single-copy variant.
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/plan/planner.h"
#include "tests/unit/topology_fixtures.h"

using namespace gyre;

namespace {

TuningTable hostTable(int ranks) {
  env::reloadForTesting("/nonexistent");
  topo::Placement p = topo::replicate(testing::loadShipped("ci_vm.xml"), 1, ranks);
  RingOptions opts;
  RingPlan rings;
  REQUIRE(buildRings(p, opts, &rings) == ncclSuccess);
  TuningTable t;
  buildTuningTable(rings, ranks, true, false, &t);
  return t;
}

PlanContext context(int ranks, const TuningTable& t, bool trees, bool mesh) {
  PlanContext ctx;
  ctx.nranks = ranks;
  ctx.ringChannels = 2;
  ctx.slotBytes = 512 << 10;
  ctx.trees = trees;
  ctx.doublingConnections = ranks == 4;
  ctx.meshConnections = mesh;
  ctx.singleCopy = true;
  ctx.shmRings = true;
  ctx.tuning = &t;
  return ctx;
}

unsigned char bit(Algorithm a) { return static_cast<unsigned char>(1u << static_cast<int>(a)); }

}  // namespace

TEST_CASE("a selected algorithm runs where it can, over the tuning table's pick") {
  TuningTable t = hostTable(4);
  PlanContext ctx = context(4, t, true, true);
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    INFO(count << " floats");
    for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct}) {
      Plan p;
      REQUIRE(planCollective(ctx, CollKind::AllReduce, count, 4, &p, {bit(a), true}) == ncclSuccess);
      CHECK(p.algorithm == a);
      CHECK_FALSE(p.doubling);
      CHECK_FALSE(p.singleCopy);
    }
    // Several allowed: the table's pick when it is one of them.
    Plan tuned, either;
    REQUIRE(planCollective(ctx, CollKind::AllReduce, count, 4, &tuned) == ncclSuccess);
    unsigned char both = bit(Algorithm::Ring) | bit(tuned.algorithm);
    REQUIRE(planCollective(ctx, CollKind::AllReduce, count, 4, &either, {both, true}) == ncclSuccess);
    CHECK(either.algorithm == tuned.algorithm);
  }
  // AllGather has no tree: Tree or Ring gives the ring.
  Plan ag;
  REQUIRE(planCollective(ctx, CollKind::AllGather, 4096, 4, &ag,
                         {static_cast<unsigned char>(bit(Algorithm::Tree) | bit(Algorithm::Ring)), true}) ==
          ncclSuccess);
  CHECK(ag.algorithm == Algorithm::Ring);
}

TEST_CASE("a required selection that cannot run is refused by name; an optional one leaves the table's choice") {
  TuningTable t = hostTable(4);
  PlanContext noMesh = context(4, t, false, false);
  Plan p;
  CHECK(planCollective(noMesh, CollKind::Broadcast, 100, 4, &p, {bit(Algorithm::Direct), true}) == ncclInvalidUsage);
  std::string why = lastErrorText();
  CHECK(why.find("algSelection allows Direct") != std::string::npos);
  CHECK(why.find("Broadcast") != std::string::npos);
  CHECK(planCollective(noMesh, CollKind::AllReduce, 100, 4, &p, {bit(Algorithm::Tree), true}) == ncclInvalidUsage);
  CHECK(planCollective(context(4, t, true, true), CollKind::Reduce, 100, 4, &p, {bit(Algorithm::Direct), true}) ==
        ncclInvalidUsage);
  Plan tuned, optional;
  REQUIRE(planCollective(noMesh, CollKind::Broadcast, 100, 4, &tuned) == ncclSuccess);
  REQUIRE(planCollective(noMesh, CollKind::Broadcast, 100, 4, &optional, {bit(Algorithm::Direct), false}) ==
          ncclSuccess);
  CHECK(optional.algorithm == tuned.algorithm);
  // Send/receive plans ignore a selection.
  CHECK(planCollective(noMesh, CollKind::SendRecv, 100, 4, &p, {bit(Algorithm::Direct), true}) == ncclSuccess);
}
