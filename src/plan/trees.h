// Trees for latency-bound collectives: a double binary tree across hosts with
// a chain through the ranks of each host, the shape NCCL uses.
//
// Two binary trees span the hosts. Each host is interior (has children) in at
// most one of them, so when each tree carries half of the data no host's NIC
// forwards to children in both trees at once and the fan-out work is spread
// evenly. Inside a host the ranks form a chain in the order of the same
// channel's ring segment, so the chain follows the fastest local paths; its
// first rank (where the ring enters, next to a NIC) is the host's head and is
// the one linked into the inter-host tree.
#pragma once

#include <vector>

#include "include/gyre.h"
#include "src/plan/ring_order.h"
#include "src/topology/placement.h"

namespace gyre {

struct TreeLinks {
  int parent = -1;             // rank data goes up to (-1 at the root)
  std::vector<int> children;   // ranks data comes up from; chain child first, then child hosts' heads
};

struct TreeChannel {
  int tree = 0;                    // which of the two trees (channel % 2)
  int root = -1;                   // root rank
  std::vector<TreeLinks> ranks;    // per rank
  std::vector<int> hostParent;     // per host: parent host in this tree (-1: root or no ranks)
};

struct TreePlan {
  std::vector<TreeChannel> channels;
};

// The two trees over n nodes, as parent arrays (-1 marks each root). Built on
// in-order numbering 1..n of a balanced binary tree, where odd numbers are
// leaves: tree 0 numbers node i as i+1, tree 1 as i+2 (node n-1 as 1), so a
// node interior in one tree is a leaf in the other.
void doubleBinaryTree(int n, std::vector<int>* parent0, std::vector<int>* parent1);

// One tree channel per ring channel, alternating between the two trees.
ncclResult_t buildTrees(const topo::Placement& p, const RingPlan& rings, TreePlan* out);

// What communicators use: on one host the two trees span the ranks
// themselves (log2 depth; a per-host chain would be as deep as the ring),
// across hosts buildTrees' first two channels. Always two channels.
ncclResult_t commTrees(const topo::Placement& p, const RingPlan& rings, TreePlan* out);

}  // namespace gyre
