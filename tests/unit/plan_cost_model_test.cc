#include "src/plan/cost_model.h"
#include "tests/unit/topology_fixtures.h"

using namespace gyre;

namespace {

CostInputs inputsFor(const char* topology, int hosts, CollKind coll) {
  topo::Placement p = topo::replicate(testing::loadShipped(topology), hosts,
                                      std::string(topology) == "cpu_2socket.xml" ? 4 : 0);
  RingPlan r;
  REQUIRE(buildRings(p, RingOptions(), &r) == ncclSuccess);
  return costInputs(r, coll, static_cast<int>(p.ranks.size()), 0);
}

CostTable at(CostInputs in, size_t bytes, const std::vector<Algorithm>& algos = {}) {
  in.bytes = bytes;
  return predictCosts(in, algos);
}

Algorithm pickedAlgo(const CostInputs& in, size_t bytes) {
  CostTable t = at(in, bytes);
  REQUIRE(t.pick >= 0);
  return t.entries[t.pick].algo;
}

// The model's own formula for one algorithm: the cheaper protocol's
// latency + slope * bytes, from the table's size-independent terms.
double bestTime(const CostTable& t, Algorithm a, double bytes) {
  double best = 1e300;
  for (const CostEntry& e : t.entries)
    if (e.algo == a && e.available) best = std::min(best, e.latencyUs + e.usPerByte * bytes);
  return best;
}

}  // namespace

TEST_CASE("multi-host AllReduce: tree for small messages, ring for large, switching where the formula crosses") {
  struct Case { const char* topology; int hosts; };
  for (Case c : {Case{"dgx_h100.xml", 2}, Case{"dgx_h100.xml", 4}, Case{"pcie_4gpu_2socket.xml", 2},
                 Case{"pcie_4gpu_2socket.xml", 8}, Case{"cpu_2socket.xml", 4}}) {
    INFO(c.topology << " x" << c.hosts);
    CostInputs in = inputsFor(c.topology, c.hosts, CollKind::AllReduce);
    CHECK(pickedAlgo(in, 8) == Algorithm::Tree);
    CHECK(pickedAlgo(in, size_t{1} << 30) == Algorithm::Ring);
    // Solve tree(S) = ring(S) on the table's terms by bisection, then check
    // the pick on both sides of it.
    CostTable terms = at(in, 0);
    double lo = 8, hi = double(size_t{1} << 30);
    for (int i = 0; i < 200; ++i) {
      double mid = (lo + hi) / 2;
      (bestTime(terms, Algorithm::Tree, mid) < bestTime(terms, Algorithm::Ring, mid) ? lo : hi) = mid;
    }
    CHECK(pickedAlgo(in, static_cast<size_t>(lo * 0.95)) == Algorithm::Tree);
    CHECK(pickedAlgo(in, static_cast<size_t>(hi * 1.05) + 1) == Algorithm::Ring);
  }
}

TEST_CASE("the pick is the cheapest available entry and times grow with size") {
  CostInputs in = inputsFor("dgx_h100.xml", 2, CollKind::AllReduce);
  double previous = 0;
  for (size_t bytes = 1; bytes <= (size_t{1} << 32); bytes *= 4) {
    CostTable t = at(in, bytes);
    REQUIRE(t.pick >= 0);
    for (const CostEntry& e : t.entries) {
      CHECK(e.timeUs == Approx(e.latencyUs + e.usPerByte * double(bytes)));
      if (e.available) CHECK(t.entries[t.pick].timeUs <= e.timeUs);
    }
    CHECK(t.entries[t.pick].timeUs >= previous);
    previous = t.entries[t.pick].timeUs;
  }
}

TEST_CASE("LL wins small messages and Simple large ones") {
  CostInputs in = inputsFor("dgx_h100.xml", 1, CollKind::AllReduce);
  CostTable small = at(in, 64), large = at(in, size_t{1} << 30);
  CHECK(small.entries[small.pick].proto == Protocol::LL);
  CHECK(large.entries[large.pick].proto == Protocol::Simple);
}

TEST_CASE("the tree is offered only for AllReduce over several hosts") {
  CostTable oneHost = at(inputsFor("dgx_h100.xml", 1, CollKind::AllReduce), 8);
  for (const CostEntry& e : oneHost.entries) CHECK(e.available == (e.algo == Algorithm::Ring));
  CostTable bcast = at(inputsFor("dgx_h100.xml", 2, CollKind::Broadcast), 8);
  for (const CostEntry& e : bcast.entries) CHECK(e.available == (e.algo == Algorithm::Ring));
}

TEST_CASE("NCCL_ALGO-style restrictions are obeyed and marked in the table") {
  CostInputs in = inputsFor("dgx_h100.xml", 2, CollKind::AllReduce);
  CostTable t = at(in, 8, {Algorithm::Ring});
  REQUIRE(t.pick >= 0);
  CHECK(t.entries[t.pick].algo == Algorithm::Ring);
  std::vector<std::string> lines = formatCostTable(t);
  int picks = 0, excluded = 0;
  for (const std::string& l : lines) {
    picks += l.find("<- pick") != std::string::npos;
    excluded += l.find("(excluded)") != std::string::npos;
  }
  CHECK(picks == 1);
  CHECK(excluded == 2);
}

TEST_CASE("more ranks on the same hosts cost the ring latency but not the tree's network depth") {
  CostInputs in;
  in.coll = CollKind::AllReduce;
  in.nnodes = 4;
  in.intraBw = 100;
  in.netBw = 50;
  in.nranks = 4;
  CostTable a = predictCosts(in);
  in.nranks = 32;
  CostTable b = predictCosts(in);
  // Ring: 2(n-1) network-bound steps; tree: same depth, longer chains only.
  CHECK(b.entries[0].latencyUs - a.entries[0].latencyUs > b.entries[2].latencyUs - a.entries[2].latencyUs);
}
