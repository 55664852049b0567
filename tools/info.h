// gyre-info: the pieces of its report, each printing one section to stdout.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "src/plan/ring_order.h"
#include "src/plan/trees.h"
#include "src/plan/tuning.h"  // sizeText
#include "src/topology/placement.h"

namespace gyre::info {

struct Model {
  std::string source;  // where the topology came from
  topo::Placement placement;
  RingPlan rings;
  TreePlan trees;
  bool hostMemory = false;  // every rank on host memory (no LL; one-host binary tree)
};

void printTopology(const Model& m);
void printPaths(const Model& m);
void printPlacement(const Model& m);
void printRings(const Model& m);
void printTrees(const Model& m);
void printConfig();
// Planner pick per collective over a size sweep; `tuningBytes` > 0 also
// prints the full cost table for AllReduce at that size.
int printPlanner(const Model& m, size_t tuningBytes);
// The same sweep with the tuner plugin `spec` (NCCL_TUNER_PLUGIN's rules):
// gyre's own pick and the plugin's, per collective and size. Non-zero when
// the plugin cannot be loaded or its init fails.
int printTunedPlanner(const Model& m, const std::string& spec);
// This host's CPU facts and the host thresholds chosen from them, with the
// reason for each (an environment override names its variable). Non-zero when
// an override is malformed.
int printHostThresholds();

// gyre-info status [--counters] [--dir D] [--wait-ms N]: the live state
// of this user's jobs on this host (info_status.cc).
int runStatus(int argc, char** argv);

// Graphviz of the hosts with the rings (and channel 0/1 trees) drawn on them.
bool writeDot(const Model& m, const std::string& path, int maxChannels);


}  // namespace gyre::info
