// The tuning table a communicator builds at init: the cost model's choice per
// collective and power-of-two size, within NCCL_ALGO.
#include "src/config/env.h"
#include "src/plan/tuning.h"
#include "tests/unit/topology_fixtures.h"

using namespace gyre;

namespace {

TuningTable tableFor(const char* topology, int hosts, int ranksPerHost, bool hostMemory, int minChannels = 1,
                     bool llAvailable = false) {
  topo::Placement p = topo::replicate(testing::loadShipped(topology), hosts, ranksPerHost);
  RingOptions opts;
  opts.minChannels = minChannels;
  RingPlan rings;
  REQUIRE(buildRings(p, opts, &rings) == ncclSuccess);
  TuningTable t;
  buildTuningTable(rings, static_cast<int>(p.ranks.size()), hostMemory, llAvailable, &t);
  return t;
}

// Runs `fn` with NCCL_ALGO set (or unset), restoring the settings afterwards.
template <typename Fn>
void withAlgo(const char* algo, Fn fn) {
  if (algo) setenv("NCCL_ALGO", algo, 1);
  else unsetenv("NCCL_ALGO");
  env::reloadForTesting("/nonexistent");
  fn();
  unsetenv("NCCL_ALGO");
  env::reloadForTesting("/nonexistent");
}

}  // namespace

TEST_CASE("host ranks on the CI machine: one-shot AllReduce to 16 KiB, tree to 64 KiB on 3 and 4 ranks, ring above") {
  withAlgo(nullptr, [] {
    for (int ranks : {3, 4}) {
      INFO(ranks << " ranks");
      TuningTable t = tableFor("ci_vm.xml", 1, ranks, true, 2);
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, 8) == Algorithm::Direct);
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, 16 << 10) == Algorithm::Direct);
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, (16 << 10) + 1) == Algorithm::Tree);
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, 64 << 10) == Algorithm::Tree);
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, (64 << 10) + 1) == Algorithm::Ring);
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, size_t{1} << 30) == Algorithm::Ring);
      CHECK(tunedAlgorithm(t, CollKind::Reduce, 8) == Algorithm::Ring);  // only AllReduce has a tree, no direct Reduce
      for (CollKind c : {CollKind::Broadcast, CollKind::AllGather, CollKind::ReduceScatter}) {
        CHECK(tunedAlgorithm(t, c, 8) == Algorithm::Direct);  // one hop instead of a chain of n-1
        CHECK(tunedAlgorithm(t, c, size_t{1} << 30) == Algorithm::Ring);
      }
      // The root's n-1 writes from cache overlap the receivers' reads.
      CHECK(tunedAlgorithm(t, CollKind::Broadcast, 32 << 10) == Algorithm::Direct);
    }
  });
}

TEST_CASE("host ranks over sockets (NCCL_SHM_DISABLE=1) run small Broadcasts as chains, small AllGather and "
          "ReduceScatter Direct, and keep the one-shot AllReduce") {
  setenv("NCCL_SHM_DISABLE", "1", 1);
  withAlgo(nullptr, [] {
    for (int ranks : {3, 4}) {
      INFO(ranks << " ranks");
      TuningTable t = tableFor("ci_vm.xml", 1, ranks, true, 2);
      CHECK(t.inputs.hostSockets);
      for (size_t bytes = 1; bytes <= (size_t{1} << 30); bytes *= 4)
        CHECK(tunedAlgorithm(t, CollKind::Broadcast, bytes) == Algorithm::Ring);  // n-1 sendmsg calls cost more
      for (CollKind c : {CollKind::AllGather, CollKind::ReduceScatter}) {
        // All posts before any wait beat n-1 dependent wake-ups; the ring's
        // single stream wins once the bytes count.
        for (size_t bytes = 1; bytes <= (size_t{32} << 10); bytes *= 4)
          CHECK(tunedAlgorithm(t, c, bytes) == Algorithm::Direct);
        CHECK(tunedAlgorithm(t, c, size_t{1} << 20) == Algorithm::Ring);
      }
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, 8) == Algorithm::Direct);
    }
    // Devices never run Direct, and the flag is a host-memory fact.
    CHECK_FALSE(tableFor("dgx_h100.xml", 1, 0, false).inputs.hostSockets);
  });
  unsetenv("NCCL_SHM_DISABLE");
  env::reloadForTesting("/nonexistent");
  withAlgo(nullptr, [] { CHECK_FALSE(tableFor("ci_vm.xml", 1, 4, true, 2).inputs.hostSockets); });
}

TEST_CASE("Direct is offered only to host memory on one host with 3..8 ranks") {
  withAlgo(nullptr, [] {
    for (CollKind c : {CollKind::Broadcast, CollKind::AllGather}) {
      for (size_t bytes = 1; bytes <= (size_t{1} << 30); bytes *= 4) {
        CHECK(tunedAlgorithm(tableFor("ci_vm.xml", 1, 2, true, 2), c, bytes) != Algorithm::Direct);
        CHECK(tunedAlgorithm(tableFor("ci_vm.xml", 1, 9, true, 2), c, bytes) != Algorithm::Direct);
        CHECK(tunedAlgorithm(tableFor("ci_vm.xml", 2, 2, true, 2), c, bytes) != Algorithm::Direct);
        CHECK(tunedAlgorithm(tableFor("dgx_h100.xml", 1, 0, false), c, bytes) != Algorithm::Direct);
      }
    }
  });
  withAlgo("Direct", [] {
    TuningTable t = tableFor("ci_vm.xml", 1, 4, true, 2);
    CHECK(t.directOnly);
    CHECK(tunedAlgorithm(t, CollKind::Broadcast, size_t{1} << 30) == Algorithm::Direct);
    CHECK(tunedAlgorithm(t, CollKind::Reduce, 8) == Algorithm::Ring);  // no direct Reduce: its ring
  });
}

TEST_CASE("two host ranks never take the tree: it has the ring's depth and more traffic") {
  withAlgo(nullptr, [] {
    TuningTable t = tableFor("ci_vm.xml", 1, 2, true, 2);
    for (size_t bytes = 1; bytes <= (size_t{1} << 30); bytes *= 4)
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, bytes) == Algorithm::Ring);
  });
}

TEST_CASE("several hosts: the tree wins small AllReduces, the ring large ones") {
  withAlgo(nullptr, [] {
    TuningTable t = tableFor("dgx_h100.xml", 4, 0, false);
    CHECK(tunedAlgorithm(t, CollKind::AllReduce, 8) == Algorithm::Tree);
    CHECK(tunedAlgorithm(t, CollKind::AllReduce, size_t{1} << 32) == Algorithm::Ring);
  });
}

TEST_CASE("NCCL_ALGO restricts the table; a collective without the forced algorithm keeps its ring") {
  withAlgo("Ring", [] {
    TuningTable t = tableFor("ci_vm.xml", 1, 4, true, 2);
    for (size_t bytes = 1; bytes <= (size_t{1} << 30); bytes *= 4)
      CHECK(tunedAlgorithm(t, CollKind::AllReduce, bytes) == Algorithm::Ring);
  });
  withAlgo("Tree", [] {
    TuningTable t = tableFor("ci_vm.xml", 1, 4, true, 2);
    CHECK(tunedAlgorithm(t, CollKind::AllReduce, size_t{1} << 30) == Algorithm::Tree);
    CHECK(tunedAlgorithm(t, CollKind::AllGather, 8) == Algorithm::Ring);
  });
  withAlgo("^tree,direct", [] {
    TuningTable t = tableFor("ci_vm.xml", 1, 4, true, 2);
    CHECK(tunedAlgorithm(t, CollKind::AllReduce, 8) == Algorithm::Ring);
  });
}

TEST_CASE("host memory has no LL protocol: the table says why") {
  withAlgo(nullptr, [] {
    TuningTable t = tableFor("ci_vm.xml", 1, 4, true, 2);
    CostInputs in = t.inputs;
    in.bytes = 1024;
    CostTable costs = predictCosts(in);
    for (const CostEntry& e : costs.entries)
      if (e.proto == Protocol::LL) {
        CHECK_FALSE(e.available);
        CHECK(std::string(e.unavailableWhy).find("Simple only") != std::string::npos);
      }
  });
}

TEST_CASE("kernels on one host's GPUs: LL for small calls, Simple for large; NCCL_PROTO and host memory rule it out") {
  withAlgo(nullptr, [] {
    TuningTable t = tableFor("dgx_h100.xml", 1, 0, false, 16, true);
    for (CollKind c : {CollKind::AllReduce, CollKind::Broadcast, CollKind::AllGather}) {
      CHECK(tunedProtocol(t, c, 8) == Protocol::LL);
      CHECK(tunedProtocol(t, c, size_t{1} << 28) == Protocol::Simple);
    }
    CHECK(tunedProtocol(tableFor("dgx_h100.xml", 1, 0, false, 16, false), CollKind::AllReduce, 8) ==
          Protocol::Simple);  // staged device communicators: the host executor runs Simple only
    CHECK(tunedProtocol(tableFor("ci_vm.xml", 1, 4, true, 2, false), CollKind::AllReduce, 8) == Protocol::Simple);
  });
  setenv("NCCL_PROTO", "Simple", 1);
  env::reloadForTesting("/nonexistent");
  CHECK(tunedProtocol(tableFor("dgx_h100.xml", 1, 0, false, 16, true), CollKind::AllReduce, 8) == Protocol::Simple);
  setenv("NCCL_PROTO", "LL", 1);
  env::reloadForTesting("/nonexistent");
  CHECK(tunedProtocol(tableFor("dgx_h100.xml", 1, 0, false, 16, true), CollKind::AllReduce, size_t{1} << 28) ==
        Protocol::LL);
  unsetenv("NCCL_PROTO");
  env::reloadForTesting("/nonexistent");
}
