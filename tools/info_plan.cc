// gyre-info sections about decisions: rings, trees, configuration and the
// planner's picks.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "src/config/env.h"
#include "src/plan/algorithm.h"
#include "src/plan/cost_model.h"
#include "src/plan/tuner_plugin.h"
#include "src/plan/tuner_steer.h"
#include "tools/info.h"

namespace gyre::info {
namespace {

// The cost model's inputs exactly as communicator init sets them.
CostInputs inputs(const Model& m, CollKind coll, int nranks, size_t bytes) {
  CostInputs in = costInputs(m.rings, coll, nranks, bytes);
  in.hostMemory = m.hostMemory;
  return in;
}

std::string nodeId(const topo::Placement& p, int host, int node) {
  return node < 0 ? "?" : p.hosts[host].topo.nodes[node].id;
}

// "NVL x14, NET x2": how many ring edges use each path type.
std::string edgeSummary(const topo::Placement& p, const std::vector<int>& order) {
  std::map<topo::PathType, int> count;
  for (size_t i = 0; i < order.size() && order.size() > 1; ++i)
    ++count[topo::rankPath(p, order[i], order[(i + 1) % order.size()]).type];
  std::string s;
  for (const auto& [type, n] : count) s += (s.empty() ? "" : ", ") + std::string(topo::pathTypeName(type)) + " x" + std::to_string(n);
  return s;
}

}  // namespace

void printRings(const Model& m) {
  const topo::Placement& p = m.placement;
  const RingPlan& r = m.rings;
  printf("\n== Rings: %zu channels x %.1f GB/s = %.1f GB/s per rank (inside hosts %.1f", r.channels.size(),
         r.channelBw, r.totalBw, r.intraBw);
  if (r.nhosts > 1) printf(", network %.1f", r.netBw);
  printf("); farthest hop inside a host: %s\n", topo::pathTypeName(r.worstIntra));
  for (size_t c = 0; c < r.channels.size(); ++c) {
    const RingChannel& ch = r.channels[c];
    std::string line;
    int host = -1;
    for (int rank : ch.order) {
      int h = p.ranks[rank].host;
      if (h != host) {
        if (host >= 0 && r.nhosts > 1) line += " >" + nodeId(p, host, ch.exitNic[host]) + "]";
        if (r.nhosts > 1) {
          line += host >= 0 ? " [" : "[";
          line += nodeId(p, h, ch.entryNic[h]);
          line += '>';
        }
        host = h;
      }
      line += ' ';
      line += std::to_string(rank);
    }
    if (r.nhosts > 1) line += " >" + nodeId(p, host, ch.exitNic[host]) + "]";
    printf("ch %2zu:%s    (%s)\n", c, line.c_str(), edgeSummary(p, ch.order).c_str());
  }
}

void printTrees(const Model& m) {
  const topo::Placement& p = m.placement;
  if (m.rings.nhosts > 1)
    printf("\n== Trees: double binary tree across hosts, a chain through each host\n");
  else
    printf("\n== Trees: double binary tree over the ranks of this host (log2 depth)\n");
  for (size_t c = 0; c < m.trees.channels.size(); ++c) {
    const TreeChannel& tc = m.trees.channels[c];
    printf("ch %2zu: tree %d, root rank %d", c, tc.tree, tc.root);
    if (m.rings.nhosts > 1) {
      printf("; host parents:");
      for (size_t h = 0; h < tc.hostParent.size(); ++h)
        printf(" %zu%s", h, tc.hostParent[h] < 0 ? "(root)" : ("<-" + std::to_string(tc.hostParent[h])).c_str());
    }
    printf("\n   ");
    for (size_t r = 0; r < p.ranks.size(); ++r) {
      const TreeLinks& l = tc.ranks[r];
      printf(" %zu:", r);
      printf(l.parent < 0 ? "^-" : "^%d", l.parent);
      if (!l.children.empty()) {
        printf(" v");
        for (size_t i = 0; i < l.children.size(); ++i) printf("%s%d", i ? "," : "", l.children[i]);
      }
    }
    printf("\n");
  }
}

void printConfig() {
  std::vector<std::string> files = env::configFilesRead();
  std::string list;
  for (const std::string& f : files) list += (list.empty() ? "" : ", ") + f;
  printf("\n== Configuration (env over file over default; files read: %s)\n", list.empty() ? "none" : list.c_str());
  for (const env::VarSpec& v : env::registry()) {
    env::Setting s = env::lookup(v.name);
    std::string value = s.value.empty() ? "(unset)" : s.value;
    printf("  %-26s = %-18s %-7s %s\n", v.name, value.c_str(), env::sourceName(s.source), s.origin.c_str());
  }
  for (const std::string& w : env::configProblems()) printf("  note: %s\n", w.c_str());
}

namespace {

const CollKind kColls[] = {CollKind::AllReduce, CollKind::Broadcast, CollKind::Reduce, CollKind::AllGather,
                           CollKind::ReduceScatter};

// What NCCL_ALGO / NCCL_PROTO allow; false when either does not parse.
bool allowedChoices(std::vector<Algorithm>* algos, std::vector<Protocol>* protos) {
  std::vector<std::string> algoNames, protoNames;
  if (parseSelection("NCCL_ALGO", env::getString("NCCL_ALGO"), algorithmNames(), &algoNames) != ncclSuccess ||
      parseSelection("NCCL_PROTO", env::getString("NCCL_PROTO"), {"Simple", "LL"}, &protoNames) != ncclSuccess)
    return false;
  for (const std::string& a : algoNames) algos->push_back(algorithmNamed(a));
  for (const std::string& p : protoNames) protos->push_back(p == "Simple" ? Protocol::Simple : Protocol::LL);
  return true;
}

}  // namespace

int printTunedPlanner(const Model& m, const std::string& spec) {
  std::vector<Algorithm> algos;
  std::vector<Protocol> protos;
  if (!allowedChoices(&algos, &protos)) return 1;
  std::unique_ptr<TunerLibrary> lib = loadTunerLibrary(spec);
  if (!lib) {
    fprintf(stderr, "gyre-info: --tuner %s: no tuner plugin could be loaded from it (NCCL_DEBUG=WARN says why)\n",
            spec.c_str());
    return 1;
  }
  const int nranks = static_cast<int>(m.placement.ranks.size());
  std::vector<int> perHost(m.placement.hosts.size(), 0);
  for (const topo::RankSite& site : m.placement.ranks) ++perHost[site.host];
  TunerSession::Facts f;
  f.nranks = nranks;
  f.nnodes = static_cast<int>(perHost.size());
  f.minRanksPerNode = *std::min_element(perHost.begin(), perHost.end());
  f.maxRanksPerNode = *std::max_element(perHost.begin(), perHost.end());
  std::unique_ptr<TunerSession> session = TunerSession::open(*lib, f);
  if (!session) {
    fprintf(stderr, "gyre-info: --tuner %s: the plugin's init failed (NCCL_DEBUG=WARN says why)\n", spec.c_str());
    return 1;
  }
  const int channels = static_cast<int>(m.rings.channels.size());
  printf("\n== Planner picks with tuner plugin %s: gyre's own -> the plugin's (channels: x N where it sets them)\n",
         session->label().c_str());
  printf("%-10s", "size");
  for (CollKind c : kColls) printf(" %-30s", collName(c) + 4);
  printf("\n");
  for (size_t bytes = 8; bytes <= (size_t{1} << 30); bytes *= 8) {
    printf("%-10s", sizeText(bytes).c_str());
    for (CollKind c : kColls) {
      CostTable t = predictCosts(inputs(m, c, nranks, bytes), algos, protos);
      std::vector<const char*> whyNot(t.entries.size(), nullptr);
      for (size_t i = 0; i < whyNot.size(); ++i)
        if (!t.entries[i].available || !t.entries[i].allowed)
          whyNot[i] = t.entries[i].available ? "NCCL_ALGO / NCCL_PROTO exclude it" : t.entries[i].unavailableWhy;
      TunerChoice choice = consultTuner(*session, t, whyNot, channels);
      auto name = [&](int i) {
        return i < 0 ? std::string("-")
                     : std::string(algorithmName(t.entries[i].algo)) + "/" + protocolName(t.entries[i].proto);
      };
      std::string cell = name(choice.ownEntry) + " -> " + (choice.answered ? name(choice.entry) : "(failed)");
      if (choice.nchannels > 0) cell += " x" + std::to_string(choice.nchannels);
      printf(" %-30s", cell.c_str());
    }
    printf("\n");
  }
  return 0;
}

int printPlanner(const Model& m, size_t tuningBytes) {
  std::vector<Algorithm> algos;
  std::vector<Protocol> protos;
  if (!allowedChoices(&algos, &protos)) return 1;
  int nranks = static_cast<int>(m.placement.ranks.size());
  const auto& colls = kColls;
  printf("\n== Planner picks: algorithm/protocol and predicted time (%d ranks, %d hosts)\n", nranks, m.rings.nhosts);
  printf("%-10s", "size");
  for (CollKind c : colls) printf(" %-20s", collName(c) + 4);
  printf("\n");
  for (size_t bytes = 8; bytes <= (size_t{1} << 30); bytes *= 8) {
    printf("%-10s", sizeText(bytes).c_str());
    for (CollKind c : colls) {
      CostTable t = predictCosts(inputs(m, c, nranks, bytes), algos, protos);
      if (t.pick < 0) {
        printf(" %-20s", "-");
        continue;
      }
      const CostEntry& e = t.entries[t.pick];
      char buf[64];
      if (e.timeUs < 1e3) snprintf(buf, sizeof(buf), "%s/%s %.1f us", algorithmName(e.algo), protocolName(e.proto), e.timeUs);
      else snprintf(buf, sizeof(buf), "%s/%s %.2f ms", algorithmName(e.algo), protocolName(e.proto), e.timeUs / 1e3);
      printf(" %-20s", buf);
    }
    printf("\n");
  }
  // Where AllReduce stops preferring the tree, by bisection on the model.
  auto algoAt = [&](size_t b) {
    CostTable t = predictCosts(inputs(m, CollKind::AllReduce, nranks, b), algos, protos);
    return t.pick < 0 ? Algorithm::Ring : t.entries[t.pick].algo;
  };
  size_t lo = 1, hi = size_t{1} << 40;
  if (algoAt(lo) == Algorithm::Tree && algoAt(hi) == Algorithm::Ring) {
    while (hi - lo > 1) {
      size_t mid = lo + (hi - lo) / 2;
      (algoAt(mid) == Algorithm::Tree ? lo : hi) = mid;
    }
    printf("AllReduce moves from Tree to Ring at %zu bytes\n", hi);
  }
  size_t at = tuningBytes > 0 ? tuningBytes : size_t{1} << 20;
  printf("\nCost table (as NCCL_DEBUG_SUBSYS=TUNING logs it):\n");
  for (const std::string& line : formatCostTable(predictCosts(inputs(m, CollKind::AllReduce, nranks, at),
                                                              algos, protos)))
    printf("%s\n", line.c_str());
  return 0;
}

}  // namespace gyre::info
