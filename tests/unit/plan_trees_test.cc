#include <functional>

#include "src/plan/trees.h"
#include "tests/unit/topology_fixtures.h"

using namespace gyre;

namespace {

// One root; every node reaches it; at most `maxChildren` children each.
void requireTree(const std::vector<int>& parent, size_t maxChildren) {
  int n = static_cast<int>(parent.size()), roots = 0;
  std::vector<size_t> children(n, 0);
  for (int i = 0; i < n; ++i) {
    if (parent[i] < 0) ++roots;
    else {
      REQUIRE(parent[i] < n);
      ++children[parent[i]];
    }
    int steps = 0, x = i;
    while (parent[x] >= 0 && steps <= n) x = parent[x], ++steps;
    REQUIRE(steps <= n);  // no cycle
  }
  REQUIRE(roots == 1);
  for (size_t c : children) REQUIRE(c <= maxChildren);
}

int depth(const std::vector<int>& parent) {
  int d = 0;
  for (size_t i = 0; i < parent.size(); ++i) {
    int k = 0;
    for (int x = static_cast<int>(i); parent[x] >= 0; x = parent[x]) ++k;
    d = std::max(d, k);
  }
  return d;
}

}  // namespace

TEST_CASE("double binary trees: both are binary trees and no node is interior in both") {
  for (int n = 1; n <= 300; ++n) {
    INFO(n << " nodes");
    std::vector<int> a, b;
    doubleBinaryTree(n, &a, &b);
    requireTree(a, 2);
    requireTree(b, 2);
    std::vector<bool> interiorA(n, false), interiorB(n, false);
    for (int i = 0; i < n; ++i) {
      if (a[i] >= 0) interiorA[a[i]] = true;
      if (b[i] >= 0) interiorB[b[i]] = true;
    }
    for (int i = 0; i < n; ++i) CHECK_FALSE((interiorA[i] && interiorB[i]));
    // Balanced: depth grows with log2(n), which is what makes trees fast for small messages.
    int log2n = 0;
    while ((1 << (log2n + 1)) <= n) ++log2n;
    CHECK(depth(a) <= log2n + 1);
    CHECK(depth(b) <= log2n + 1);
  }
}

TEST_CASE("tree channels over DGX-like hosts: chains on NVLink inside, heads linked across") {
  topo::Topology t = testing::loadShipped("dgx_h100.xml");
  for (int hosts : {1, 2, 3, 5}) {
    INFO(hosts << " hosts");
    topo::Placement p = topo::replicate(t, hosts, 0);
    RingPlan rings;
    REQUIRE(buildRings(p, RingOptions(), &rings) == ncclSuccess);
    TreePlan trees;
    REQUIRE(buildTrees(p, rings, &trees) == ncclSuccess);
    REQUIRE(trees.channels.size() == rings.channels.size());
    std::vector<std::vector<bool>> hostInterior(2, std::vector<bool>(hosts, false));
    for (size_t c = 0; c < trees.channels.size(); ++c) {
      const TreeChannel& tc = trees.channels[c];
      CHECK(tc.tree == static_cast<int>(c % 2));
      std::vector<int> parent(p.ranks.size());
      for (size_t r = 0; r < p.ranks.size(); ++r) {
        parent[r] = tc.ranks[r].parent;
        // Children and parents agree.
        for (int child : tc.ranks[r].children) CHECK(tc.ranks[child].parent == static_cast<int>(r));
        if (parent[r] < 0) {
          CHECK(tc.root == static_cast<int>(r));
          continue;
        }
        topo::PathType type = topo::rankPath(p, static_cast<int>(r), parent[r]).type;
        if (p.ranks[r].host == p.ranks[parent[r]].host) CHECK(type == topo::PathType::NVL);
        else hostInterior[tc.tree][p.ranks[parent[r]].host] = true;
      }
      requireTree(parent, 3);  // the chain's next rank plus two child hosts
    }
    for (int h = 0; h < hosts; ++h) CHECK_FALSE((hostInterior[0][h] && hostInterior[1][h]));
  }
}
