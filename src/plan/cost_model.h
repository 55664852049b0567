// The cost model: predicted time of one collective for every algorithm x
// protocol, from the bandwidths the ring search found on the topology and
// per-hop latencies. The planner runs the cheapest allowed entry;
// NCCL_DEBUG_SUBSYS=TUNING prints the table the choice came from.
//
//   time = latency + bytesFactor * bytes / (bandwidth * protocolEfficiency)
//
// Ring: a collective of n ranks takes 2(n-1) (AllReduce) or n-1 steps in a
// chain of dependent hops around the ring, of which up to one per host per
// lap cross the network. Data per rank follows the nccl-tests bus factors:
// AllReduce 2(n-1)/n, AllGather and ReduceScatter (n-1)/n, Broadcast and
// Reduce 1 (a pipelined chain: its latency is the sum of its hops).
//
// Tree (AllReduce over 2+ hosts): reduce up and broadcast down the double
// binary tree, so the latency grows with the tree depth (log2 of the hosts)
// plus the chain inside a host, not with the rank count. Each tree channel
// splits its threads between the upward and the downward stream (as NCCL's
// tree kernels do), halving what the intra-host chain moves per direction;
// a host interior in one tree forwards to two children, so with 3+ hosts a
// NIC carries 2x the data (with 2 hosts, 1x).
//
// Host memory: the executor is a thread per rank polling shared-memory slots
// or sockets, so a hop costs the time for the peer's thread to notice (and,
// when it sleeps, to be woken). On one host the tree spans the ranks
// themselves (depth log2 n, an interior rank feeding two children), which is
// what makes it win for small messages on 3+ ranks.
//
// Protocols: LL sends 4 data bytes per 8-byte line with the flag in the other
// 4, so it moves half the bandwidth but skips the per-step flag round trip of
// Simple, which makes each hop cheaper.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "src/call/coll_kind.h"
#include "src/plan/algorithm.h"
#include "src/plan/ring_order.h"
#include "src/topology/paths.h"

namespace gyre {

// The mesh (a connection from every rank to every rank, made at init for
// Direct) exists for host-memory communicators of 3..kMeshMaxRanks ranks on
// one host; two ranks' ring already is a mesh. Above 8 ranks a root posting
// n-1 sends loses to a chain anyway, and the mesh's segments would grow as n^2.
constexpr int kMeshMaxRanks = 8;
inline bool directAvailable(bool hostMemory, int nhosts, int nranks) {
  return hostMemory && nhosts == 1 && nranks >= 3 && nranks <= kMeshMaxRanks;
}

struct CostInputs {
  CollKind coll = CollKind::AllReduce;
  int nranks = 1;
  int nnodes = 1;
  size_t bytes = 0;       // nccl-tests "size": AllGather's gathered output, ReduceScatter's input
  double intraBw = 0;     // GB/s per rank inside hosts, all channels (RingPlan::intraBw)
  double netBw = 0;       // GB/s per host over the network (RingPlan::netBw)
  topo::PathType intraPath = topo::PathType::NVL;  // farthest hop inside a host (sets its latency)
  // Host-memory ranks: hops are a host thread noticing a slot (no LL
  // protocol), and on one host the tree is a binary tree over the ranks.
  bool hostMemory = false;
  // NCCL_ALGO=Tree on one host of GPUs: run the tree (a binary tree over the
  // host's ranks) although the ring is faster there, as NCCL does when forced.
  bool treeForcedOnOneHost = false;
  // Host-memory ranks of one host that talk over TCP (NCCL_SHM_DISABLE=1): a
  // Direct post is then a system call, not a cache-line handoff.
  bool hostSockets = false;
};

struct CostEntry {
  Algorithm algo = Algorithm::Ring;
  Protocol proto = Protocol::Simple;
  bool available = false;
  const char* unavailableWhy = "";
  bool allowed = true;    // by NCCL_ALGO / NCCL_PROTO
  double latencyUs = 0;   // size-independent part
  double usPerByte = 0;   // slope
  double bwGBs = 0;       // effective bandwidth behind the slope
  double timeUs = 0;      // latencyUs + usPerByte * bytes
};

struct CostTable {
  CostInputs in;
  std::vector<CostEntry> entries;  // Ring/Simple, Ring/LL, Tree/Simple, Tree/LL, Direct/Simple, Direct/LL
  int pick = -1;                   // index of the cheapest available, allowed entry
};

// Empty `algos` / `protos` allow everything.
CostTable predictCosts(const CostInputs& in, const std::vector<Algorithm>& algos = {},
                       const std::vector<Protocol>& protos = {});

// Inputs for a collective on the ranks a ring plan covers.
CostInputs costInputs(const RingPlan& plan, CollKind coll, int nranks, size_t bytes);

// The table as text lines (header first), marking the pick.
std::vector<std::string> formatCostTable(const CostTable& t);
// Logs the table at INFO under TUNING.
void logCostTable(const CostTable& t);

}  // namespace gyre
