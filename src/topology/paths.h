// Path classification between every pair of nodes of one host, with NCCL's
// names, nearest first:
//   LOC  same device
//   NVL  NVLink only (directly or through NVSwitches)
//   PIX  through at most one PCIe switch
//   PXB  through several PCIe switches, never through the CPU
//   PHB  through a CPU's PCIe host bridge (also any path ending at a CPU)
//   SYS  across the socket interconnect (UPI/QPI/xGMI)
//   NET  different hosts (only between ranks; see src/plan)
// A path also carries its bottleneck bandwidth and the directed links it uses,
// which the ring search needs to know which edges compete for the same wire.
#pragma once

#include <string>
#include <vector>

#include "src/topology/model.h"

namespace gyre::topo {

enum class PathType : uint8_t { LOC = 0, NVL, PIX, PXB, PHB, SYS, NET };

const char* pathTypeName(PathType t);
// Parses a level name (case-insensitive). False if unknown.
bool parsePathType(const std::string& text, PathType* out);

// Resources are what paths consume: each direction of each link
// (2 * link + 0 for a->b, 2 * link + 1 for b->a), then one per node for
// traffic that stays inside it (ranks sharing a CPU or GPU).
inline int linkResource(int link, bool reverse) { return 2 * link + (reverse ? 1 : 0); }
inline int nodeResource(const Topology& t, int node) { return 2 * static_cast<int>(t.links.size()) + node; }
int resourceCount(const Topology& t);
// GB/s each resource can carry.
std::vector<double> resourceCapacity(const Topology& t);
// "gpu0->nvs0", "cpu1 (local)" for messages and gyre-info.
std::string resourceName(const Topology& t, int resource);

struct RouteUse {
  int resource = -1;
  double share = 1.0;  // fraction of the path's traffic that crosses this resource
};

struct Path {
  bool valid = false;  // false: not connected
  PathType type = PathType::SYS;
  double bw = 0;  // bottleneck GB/s (for NVLink fabrics: the sum over parallel switches)
  int hops = 0;   // links crossed on the main route
  std::vector<RouteUse> route;
};

struct PathMatrix {
  int n = 0;
  std::vector<Path> paths;  // n * n, row = source node
  const Path& at(int from, int to) const { return paths[static_cast<size_t>(from) * n + to]; }
};

// Best path for every ordered pair of nodes. Data never passes through a GPU
// or a NIC; among routes, the one of the nearest type wins, then the widest,
// then the shortest, then the lowest node indices, so every rank computes the
// same answer.
PathMatrix computePaths(const Topology& t);

// The CPU node whose path to `node` is nearest (then widest); -1 if none.
int nearestCpu(const Topology& t, const PathMatrix& p, int node);

}  // namespace gyre::topo
