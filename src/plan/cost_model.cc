#include "src/plan/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "src/debug/log.h"
#include "src/plan/calibration.h"

namespace gyre {
namespace {

// Microseconds. Orders of magnitude from published measurements of kernel
// launch and per-hop flag latency on current GPUs, NICs and host memory; they
// set the crossover sizes, not the results, and NCCL_ALGO/NCCL_PROTO override.
constexpr double kBaseUs[2][2] = {
    /* Ring: Simple, LL */ {6.0, 4.0},
    /* Tree: Simple, LL */ {7.0, 5.0},
};
enum HopClass { kNvl, kPci, kShm, kNet, kHost };
constexpr double kHopUs[5][2] = {
    /* NVLink */ {1.0, 0.5},
    /* PCIe   */ {1.5, 0.8},
    /* shared memory / socket interconnect */ {2.0, 1.0},
    /* network */ {6.0, 3.5},
    /* host thread to host thread (LL: none) */ {kHostHopUs, kHostHopUs},
};
// The host figures (kHostBaseUs, kHostHopUs: a host collective starts
// without a kernel launch) and the Direct costs below are fitted, not
// derived; their values and measurements are in calibration.h.
//
// Direct (host memory, one host): a rank that sends to k peers posts k slots
// one after another, and each further post costs about a cache-line handoff,
// far less than a hop (kDirectExtraPostUs). Over sockets each further post is
// a sendmsg and a receiver woken by the kernel (kDirectExtraPostSocketUs);
// for AllGather and ReduceScatter every rank posts all its sends before it
// waits, while each of the ring's n-1 steps waits for a peer that may have
// no core (kDirectExtraPostSocketGatherUs). AllReduce's one-shot counts the
// shared-memory cost (it replaces the tree, whose hops are system calls too).
// Direct all-gather moves the ring's bytes through n-1 FIFOs at once, which
// the ring's pipelined single stream beats on a bandwidth-bound copy
// (kDirectGatherSlope). A Direct broadcast over shared memory costs a little
// over half the root's n-1 writes, since the receivers copy out in parallel
// (kDirectBroadcastShmSlope); over sockets each send is a whole sendmsg.

constexpr double kProtoEfficiency[2] = {1.0, 0.5};  // Simple, LL
constexpr double kTreeSplit = 0.5;                  // see the header: each direction gets half a channel

HopClass hopClass(topo::PathType t) {
  switch (t) {
    case topo::PathType::NVL: return kNvl;
    case topo::PathType::PIX:
    case topo::PathType::PXB:
    case topo::PathType::PHB: return kPci;
    case topo::PathType::NET: return kNet;
    default: return kShm;
  }
}

double ringFactor(CollKind c, int n) {
  switch (c) {
    case CollKind::AllReduce: return 2.0 * (n - 1) / n;
    case CollKind::AllGather:
    case CollKind::ReduceScatter: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

void ringEntry(const CostInputs& in, CostEntry* e) {
  int p = static_cast<int>(e->proto);
  int n = in.nranks;
  if (n < 2) {
    e->unavailableWhy = "one rank";
    return;
  }
  if (in.hostMemory && e->proto == Protocol::LL) {
    e->unavailableWhy = "host memory runs Simple only";
    return;
  }
  double intraHop = kHopUs[in.hostMemory ? kHost : hopClass(in.intraPath)][p];
  double netHop = kHopUs[kNet][p];
  // Step k on a rank waits for its neighbour's step k-1, so the critical path
  // is `steps` consecutive ring hops; a ring crosses the network nnodes times
  // per lap, so those hops include at most 2 laps' worth of network hops.
  int steps = in.coll == CollKind::AllReduce ? 2 * (n - 1) : n - 1;
  int laps = in.coll == CollKind::AllReduce ? 2 : 1;
  int netSteps = in.nnodes > 1 ? std::min(steps, laps * in.nnodes) : 0;
  if (in.coll == CollKind::Broadcast || in.coll == CollKind::Reduce) netSteps = in.nnodes - 1;  // one pass down the chain
  double lat = (in.hostMemory ? kHostBaseUs : kBaseUs[0][p]) + netSteps * netHop + (steps - netSteps) * intraHop;
  double bw = in.nnodes > 1 ? std::min(in.intraBw, in.netBw) : in.intraBw;
  e->available = bw > 0;
  e->unavailableWhy = "no bandwidth";
  e->latencyUs = lat;
  e->bwGBs = e->available ? bw * kProtoEfficiency[p] / ringFactor(in.coll, n) : 0;
  e->usPerByte = e->available ? ringFactor(in.coll, n) / (bw * kProtoEfficiency[p] * 1e3) : 0;
}

// One host, host memory: a binary tree over the ranks, reduce up then
// broadcast down; an interior rank receives from (and later sends to) two
// children, so it moves twice the message in each phase.
void hostTreeEntry(const CostInputs& in, CostEntry* e) {
  if (in.nranks < 2) {
    e->unavailableWhy = "one rank";
    return;
  }
  int depth = static_cast<int>(std::floor(std::log2(in.nranks)));
  e->latencyUs = kHostBaseUs + 2.0 * depth * kHopUs[kHost][0];
  e->available = in.intraBw > 0;
  e->unavailableWhy = "no bandwidth";
  e->bwGBs = e->available ? in.intraBw / 2.0 : 0;
  e->usPerByte = e->available ? 2.0 / (in.intraBw * 1e3) : 0;
}

void treeEntry(const CostInputs& in, CostEntry* e) {
  int p = static_cast<int>(e->proto);
  if (in.coll != CollKind::AllReduce) {
    e->unavailableWhy = "tree runs AllReduce only";
    return;
  }
  if (in.hostMemory && e->proto == Protocol::LL) {
    e->unavailableWhy = "host memory runs Simple only";
    return;
  }
  if (in.nnodes < 2 && (in.hostMemory || in.treeForcedOnOneHost)) {
    hostTreeEntry(in, e);
    return;
  }
  if (in.nnodes < 2) {
    e->unavailableWhy = "one host (the chain would be a slower ring)";
    return;
  }
  int ppn = (in.nranks + in.nnodes - 1) / in.nnodes;
  int depth = static_cast<int>(std::floor(std::log2(in.nnodes)));
  e->latencyUs = kBaseUs[1][p] + 2.0 * (depth * kHopUs[kNet][p] + (ppn - 1) * kHopUs[hopClass(in.intraPath)][p]);
  double netBytes = in.nnodes >= 3 ? 2.0 : 1.0;
  double chainSlope = ppn > 1 ? 1.0 / (in.intraBw * kTreeSplit) : 0;
  double slope = std::max(netBytes / in.netBw, chainSlope);  // seconds per GB, per byte of input
  e->available = in.netBw > 0 && (ppn == 1 || in.intraBw > 0);
  e->unavailableWhy = "no bandwidth";
  e->usPerByte = e->available ? slope / (kProtoEfficiency[p] * 1e3) : 0;
  e->bwGBs = e->available ? kProtoEfficiency[p] / slope : 0;
}

// Every rank to every rank over the mesh connections (directAvailable):
// one dependent hop. Broadcast: the root sends the whole message to n-1
// ranks. AllGather: every rank sends its block to n-1 ranks (the ring's
// bytes, kDirectGatherSlope). AllReduce (one-shot): every rank sends its
// input to n-1 ranks and reduces all n inputs itself; ReduceScatter the same
// per block (each rank reduces the n copies of its own block).
void directEntry(const CostInputs& in, CostEntry* e) {
  int n = in.nranks;
  if (!directAvailable(in.hostMemory, in.nnodes, n)) {
    e->unavailableWhy = "needs host memory, one host and 3..8 ranks";
    return;
  }
  if (e->proto == Protocol::LL) {
    e->unavailableWhy = "host memory runs Simple only";
    return;
  }
  double sendFactor = 0;
  double socketPostUs = kDirectExtraPostUs;  // a further post over sockets
  switch (in.coll) {
    case CollKind::Broadcast:
      sendFactor = (in.hostSockets ? 1.0 : kDirectBroadcastShmSlope) * (n - 1);
      socketPostUs = kDirectExtraPostSocketUs;
      break;
    case CollKind::AllGather:
      sendFactor = kDirectGatherSlope * (n - 1) / n;
      socketPostUs = kDirectExtraPostSocketGatherUs;
      break;
    case CollKind::AllReduce: sendFactor = n; break;  // n-1 copies out, n inputs read and reduced
    case CollKind::ReduceScatter:
      sendFactor = kDirectGatherSlope * (n - 1) / n;  // the ring's bytes, at once
      socketPostUs = kDirectExtraPostSocketGatherUs;
      break;
    default: e->unavailableWhy = "no direct schedule for this collective"; return;
  }
  e->available = in.intraBw > 0;
  e->unavailableWhy = "no bandwidth";
  const double extraPostUs = in.hostSockets ? socketPostUs : kDirectExtraPostUs;
  e->latencyUs = kHostBaseUs + kHopUs[kHost][0] + (n - 2) * extraPostUs;
  e->usPerByte = e->available ? sendFactor / (in.intraBw * 1e3) : 0;
  e->bwGBs = e->available ? in.intraBw / sendFactor : 0;
}

template <typename T>
bool contains(const std::vector<T>& v, T x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

CostTable predictCosts(const CostInputs& in, const std::vector<Algorithm>& algos,
                       const std::vector<Protocol>& protos) {
  CostTable t;
  t.in = in;
  for (Algorithm a : {Algorithm::Ring, Algorithm::Tree, Algorithm::Direct})
    for (Protocol p : {Protocol::Simple, Protocol::LL}) {
      CostEntry e;
      e.algo = a;
      e.proto = p;
      e.allowed = contains(algos, a) && contains(protos, p);
      if (a == Algorithm::Ring) ringEntry(in, &e);
      else if (a == Algorithm::Tree) treeEntry(in, &e);
      else directEntry(in, &e);
      e.timeUs = e.latencyUs + e.usPerByte * static_cast<double>(in.bytes);
      t.entries.push_back(e);
    }
  for (size_t i = 0; i < t.entries.size(); ++i) {
    const CostEntry& e = t.entries[i];
    if (!e.available || !e.allowed) continue;
    if (t.pick < 0 || e.timeUs < t.entries[t.pick].timeUs) t.pick = static_cast<int>(i);
  }
  return t;
}

CostInputs costInputs(const RingPlan& plan, CollKind coll, int nranks, size_t bytes) {
  CostInputs in;
  in.coll = coll;
  in.nranks = nranks;
  in.nnodes = plan.nhosts;
  in.bytes = bytes;
  in.intraBw = plan.intraBw;
  in.netBw = plan.netBw;
  in.intraPath = plan.worstIntra;
  return in;
}

std::vector<std::string> formatCostTable(const CostTable& t) {
  std::vector<std::string> lines;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s of %zu bytes on %d ranks / %d hosts (intra %.1f GB/s, net %.1f GB/s):",
           collName(t.in.coll), t.in.bytes, t.in.nranks, t.in.nnodes, t.in.intraBw, t.in.netBw);
  lines.push_back(buf);
  snprintf(buf, sizeof(buf), "  %-5s %-7s %12s %12s %14s", "algo", "proto", "latency us", "algbw GB/s", "predicted us");
  lines.push_back(buf);
  for (size_t i = 0; i < t.entries.size(); ++i) {
    const CostEntry& e = t.entries[i];
    if (!e.available)
      snprintf(buf, sizeof(buf), "  %-5s %-7s   n/a: %s", algorithmName(e.algo), protocolName(e.proto),
               e.unavailableWhy);
    else
      snprintf(buf, sizeof(buf), "  %-5s %-7s %12.2f %12.2f %14.2f%s%s", algorithmName(e.algo),
               protocolName(e.proto), e.latencyUs, e.bwGBs, e.timeUs, e.allowed ? "" : "  (excluded)",
               static_cast<int>(i) == t.pick ? "  <- pick" : "");
    lines.push_back(buf);
  }
  return lines;
}

void logCostTable(const CostTable& t) {
  if (logLevel() < LogLevel::Info) return;
  for (const std::string& line : formatCostTable(t)) GYRE_INFO("TUNING", "%s", line.c_str());
}

}  // namespace gyre
