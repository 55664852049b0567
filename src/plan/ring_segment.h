// Internal to ring_order.cc: the per-host part of the ring search. A segment
// is one host's share of one channel's ring: every local rank once, either as
// a closed cycle (one host) or as a path entered and left through NICs.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "src/topology/placement.h"

namespace gyre::ring {

// Local ranks up to these counts are searched exhaustively (with pruning):
// (n-1)! cycles, or n! paths; beyond, the order follows the topology tree.
constexpr int kExactCycle = 9;
constexpr int kExactPath = 8;

struct HostState {
  const topo::HostModel* model = nullptr;
  std::vector<int> ranks;  // global ranks on this host, ascending
  std::vector<int> nodes;  // their nodes
  std::vector<int> nics;   // NIC nodes; empty means one assumed port
  int portBase = 0;        // resources from here on are NIC ports: 2k send, 2k+1 receive
  std::vector<double> cap, load;
  std::map<std::pair<int, int>, int> usedEdges;  // (from, to) local indices -> earlier channels using it
};

HostState makeHostState(const topo::Placement& p, int host, const std::vector<int>& ranks);

struct Segment {
  std::vector<int> order;  // local indices
  int entryNic = -1, exitNic = -1;  // index into HostState::nics (0 for the assumed port)
  double bw = 0;
  int typeSum = 0;
  int overlap = 0;  // sum over its edges of earlier channels already using that edge
};

// The best segment for the next channel given the loads in `h` (see the
// ordering in ring_order.h). `cycle`: one host, close the ring locally.
Segment searchSegment(const HostState& h, bool cycle, int channel);

// Adds the segment's traffic to the host's loads and remembers its edges.
void commitSegment(HostState* h, const Segment& s, bool cycle);

// (resource, share) pairs the segment puts on the host's wires and ports.
std::vector<std::pair<int, double>> segmentUsage(const HostState& h, const Segment& s, bool cycle);

}  // namespace gyre::ring
