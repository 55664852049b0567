// Where ranks run: a list of hosts (each one topology with its paths) and, per
// rank, the host and the device it uses. This is the whole input of the graph
// search in src/plan, so the search is a pure function every rank can evaluate
// and get the same answer.
#pragma once

#include <vector>

#include "include/gyre.h"
#include "src/topology/model.h"
#include "src/topology/paths.h"

namespace gyre::topo {

struct HostModel {
  Topology topo;
  PathMatrix paths;
  std::vector<double> capacity;  // per resource (paths.h), GB/s
};

HostModel makeHost(Topology t);

struct RankSite {
  int host = 0;
  int gpu = -1;  // CUDA ordinal on that host; -1 for a host-memory rank
  int cpu = -1;  // NUMA node of a host-memory rank (-1: the first CPU)
};

struct Placement {
  std::vector<HostModel> hosts;
  std::vector<RankSite> ranks;
};

// `nhosts` copies of `t`. With ranksPerHost == 0 each host gets one rank per
// GPU in device order (a host without GPUs gets one rank per NUMA node);
// otherwise ranksPerHost host-memory ranks, split into contiguous blocks over
// the NUMA nodes (ranks 0..k-1 on the first, and so on), as a launcher that
// binds ranks to sockets in order would place them. Ranks are numbered host
// by host.
Placement replicate(const Topology& t, int nhosts, int ranksPerHost);

// Every rank names an existing host and an existing GPU or CPU there.
ncclResult_t validatePlacement(const Placement& p);

// The node (index into the rank's host topology) that holds the rank's data.
int rankNode(const Placement& p, int rank);

// The ranks on each host, in rank order.
std::vector<std::vector<int>> ranksByHost(const Placement& p);

// Network bandwidth of a host: its fastest NIC, or 10 Gb/s Ethernet
// (1.25 GB/s) when the topology lists none, so plans still form for files that
// leave NICs out.
double hostNetBw(const Topology& t);
constexpr double kAssumedNetBw = 1.25;

// Bottleneck of a path between two ranks: NVL..SYS inside a host; NET between
// hosts, with the slower of the two hosts' fastest NICs as bandwidth.
Path rankPath(const Placement& p, int a, int b);

}  // namespace gyre::topo
