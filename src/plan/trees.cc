#include "src/plan/trees.h"

#include "src/debug/error.h"

namespace gyre {
namespace {

// Children of label x (1-based, in-order) in a balanced tree over 1..n: x's
// lowest set bit b says how far its subtrees reach; a right subtree that would
// pass n shrinks until it fits.
void childrenOf(int x, int n, std::vector<int>* out) {
  out->clear();
  int b = x & -x;
  if (b == 1) return;
  out->push_back(x - b / 2);
  int d = b / 2;
  while (d >= 1 && x + d > n) d /= 2;
  if (d >= 1) out->push_back(x + d);
}

std::vector<int> treeByLabel(int n, int (*label)(int node, int n)) {
  std::vector<int> nodeOf(n + 1), parent(n, -1), kids;
  for (int i = 0; i < n; ++i) nodeOf[label(i, n)] = i;
  for (int x = 1; x <= n; ++x) {
    childrenOf(x, n, &kids);
    for (int c : kids) parent[nodeOf[c]] = nodeOf[x];
  }
  return parent;
}

int label0(int i, int) { return i + 1; }
int label1(int i, int n) { return (i + 1) % n + 1; }

}  // namespace

void doubleBinaryTree(int n, std::vector<int>* parent0, std::vector<int>* parent1) {
  *parent0 = treeByLabel(n, label0);
  *parent1 = treeByLabel(n, label1);
}

ncclResult_t buildTrees(const topo::Placement& p, const RingPlan& rings, TreePlan* out) {
  GYRE_CHECK(topo::validatePlacement(p));
  *out = TreePlan();
  int nranks = static_cast<int>(p.ranks.size());
  std::vector<int> hostOf(p.ranks.size());
  std::vector<int> used;  // hosts that have ranks, in host order
  std::vector<int> slot(p.hosts.size(), -1);
  for (int r = 0; r < nranks; ++r) hostOf[r] = p.ranks[r].host;
  for (const auto& ranks : topo::ranksByHost(p))
    if (!ranks.empty()) {
      slot[p.ranks[ranks[0]].host] = static_cast<int>(used.size());
      used.push_back(p.ranks[ranks[0]].host);
    }
  std::vector<int> parents[2];
  doubleBinaryTree(static_cast<int>(used.size()), &parents[0], &parents[1]);

  for (size_t c = 0; c < rings.channels.size(); ++c) {
    const std::vector<int>& order = rings.channels[c].order;
    if (static_cast<int>(order.size()) != nranks)
      return fail(ncclInternalError, "tree search: ring channel %zu has %zu ranks, expected %d", c, order.size(), nranks);
    TreeChannel tc;
    tc.tree = static_cast<int>(c % 2);
    tc.ranks.assign(nranks, TreeLinks());
    tc.hostParent.assign(p.hosts.size(), -1);
    // Chains: each host's ranks in the order the ring visits them.
    std::vector<std::vector<int>> chain(used.size());
    for (int r : order) chain[slot[hostOf[r]]].push_back(r);
    for (const auto& ch : chain)
      for (size_t i = 1; i < ch.size(); ++i) {
        tc.ranks[ch[i]].parent = ch[i - 1];
        tc.ranks[ch[i - 1]].children.push_back(ch[i]);
      }
    const std::vector<int>& parent = parents[tc.tree];
    for (size_t s = 0; s < used.size(); ++s) {
      int head = chain[s][0];
      if (parent[s] < 0) {
        tc.root = head;
        continue;
      }
      int up = chain[parent[s]][0];
      tc.hostParent[used[s]] = used[parent[s]];
      tc.ranks[head].parent = up;
      tc.ranks[up].children.push_back(head);
    }
    out->channels.push_back(std::move(tc));
  }
  return ncclSuccess;
}

ncclResult_t commTrees(const topo::Placement& p, const RingPlan& rings, TreePlan* out) {
  int n = static_cast<int>(p.ranks.size());
  if (rings.nhosts > 1) {
    RingPlan two = rings;  // one tree channel per ring channel: make sure both trees exist
    while (two.channels.size() < 2) two.channels.push_back(two.channels[0]);
    GYRE_CHECK(buildTrees(p, two, out));
    out->channels.resize(2);
    return ncclSuccess;
  }
  std::vector<int> parents[2];
  doubleBinaryTree(n, &parents[0], &parents[1]);
  *out = TreePlan();
  for (int t = 0; t < 2; ++t) {
    TreeChannel tc;
    tc.tree = t;
    tc.ranks.resize(n);
    tc.hostParent.assign(p.hosts.size(), -1);
    for (int r = 0; r < n; ++r) {
      tc.ranks[r].parent = parents[t][r];
      if (parents[t][r] < 0) tc.root = r;
      else tc.ranks[parents[t][r]].children.push_back(r);
    }
    out->channels.push_back(std::move(tc));
  }
  return ncclSuccess;
}

}  // namespace gyre
