#include "src/topology/paths.h"

#include <strings.h>

#include <algorithm>
#include <limits>

namespace gyre::topo {
namespace {

// Route weights that make "shortest" mean "nearest type": one socket crossing
// outweighs any number of host bridges, which outweigh any number of PCIe
// switches, which outweigh NVLink hops. So the cheapest route is also the one
// of the best NCCL path type, and among those the one with fewest switches.
constexpr double kLinkWeight = 1;
constexpr double kSmpWeight = 1e8;
constexpr double kCpuWeight = 1e5;
constexpr double kSwitchWeight = 100;
constexpr double kGpuLocalBw = 1000;  // HBM-class copy rate for ranks sharing one GPU

bool isRouter(NodeKind k) { return k == NodeKind::Pci || k == NodeKind::Cpu || k == NodeKind::NvSwitch; }

double nodeWeight(NodeKind k) {
  if (k == NodeKind::Cpu) return kCpuWeight;
  if (k == NodeKind::Pci) return kSwitchWeight;
  return kLinkWeight;
}

struct Label {
  double weight = std::numeric_limits<double>::infinity();
  double bw = 0;
  int prevLink = -1;
  bool done = false;
};

// Single-source search over the weights above; ties prefer the wider route.
std::vector<Label> search(const Topology& t, const std::vector<std::vector<int>>& adj, int src) {
  std::vector<Label> lab(t.nodes.size());
  lab[src].weight = 0;
  lab[src].bw = std::numeric_limits<double>::infinity();
  for (;;) {
    int u = -1;
    for (size_t i = 0; i < lab.size(); ++i)
      if (!lab[i].done && lab[i].weight < std::numeric_limits<double>::infinity() &&
          (u < 0 || lab[i].weight < lab[u].weight || (lab[i].weight == lab[u].weight && lab[i].bw > lab[u].bw)))
        u = static_cast<int>(i);
    if (u < 0) break;
    lab[u].done = true;
    if (u != src && !isRouter(t.nodes[u].kind)) continue;
    double through = u == src ? 0 : nodeWeight(t.nodes[u].kind);
    for (int l : adj[u]) {
      int v = t.otherEnd(l, u);
      if (lab[v].done) continue;
      double w = lab[u].weight + through + (t.links[l].type == LinkType::Smp ? kSmpWeight : kLinkWeight);
      double bw = std::min(lab[u].bw, t.links[l].bw);
      if (w < lab[v].weight || (w == lab[v].weight && bw > lab[v].bw)) lab[v] = Label{w, bw, l, false};
    }
  }
  return lab;
}

PathType classify(const Topology& t, const std::vector<int>& nodes, const std::vector<int>& links) {
  bool allNvl = true, smp = false, cpu = false;
  int switches = 0;
  for (int l : links) {
    allNvl = allNvl && t.links[l].type == LinkType::NvLink;
    smp = smp || t.links[l].type == LinkType::Smp;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeKind k = t.nodes[nodes[i]].kind;
    cpu = cpu || k == NodeKind::Cpu;
    if (k == NodeKind::Pci && i > 0 && i + 1 < nodes.size()) ++switches;
  }
  if (allNvl) return PathType::NVL;
  if (smp) return PathType::SYS;
  if (cpu) return PathType::PHB;
  return switches <= 1 ? PathType::PIX : PathType::PXB;
}

// NVLink between two GPUs: direct lanes plus every NVSwitch both reach, used in
// parallel (the switches are non-blocking, so their capacities add up).
bool nvlinkBundle(const Topology& t, const std::vector<std::vector<int>>& adj, int a, int b, Path* p) {
  // One hop of a sub-route: the NVLink elements between two nodes, used in
  // proportion to their bandwidth.
  struct Hop {
    std::vector<RouteUse> uses;
    double cap = 0;
  };
  auto hop = [&](int from, int to) {
    Hop h;
    for (int l : adj[from])
      if (t.links[l].type == LinkType::NvLink && t.otherEnd(l, from) == to) {
        h.uses.push_back({linkResource(l, t.links[l].a != from), t.links[l].bw});
        h.cap += t.links[l].bw;
      }
    return h;
  };
  std::vector<std::vector<Hop>> subs;
  if (Hop d = hop(a, b); d.cap > 0) subs.push_back({d});
  for (int s : t.ofKind(NodeKind::NvSwitch)) {
    Hop in = hop(a, s), out = hop(s, b);
    if (in.cap > 0 && out.cap > 0) subs.push_back({in, out});
  }
  auto subCap = [](const std::vector<Hop>& hs) {
    double c = hs[0].cap;
    for (const Hop& h : hs) c = std::min(c, h.cap);
    return c;
  };
  double total = 0;
  for (const auto& hs : subs) total += subCap(hs);
  if (total <= 0) return false;
  p->valid = true;
  p->type = PathType::NVL;
  p->bw = total;
  p->hops = subs.size() == 1 && subs[0].size() == 1 ? 1 : 2;
  p->route.clear();
  for (const auto& hs : subs)
    for (const Hop& h : hs)
      for (const RouteUse& u : h.uses) p->route.push_back({u.resource, subCap(hs) / total * u.share / h.cap});
  return true;
}

}  // namespace

const char* pathTypeName(PathType t) {
  static const char* kNames[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET"};
  return kNames[static_cast<int>(t)];
}

bool parsePathType(const std::string& text, PathType* out) {
  for (int i = 0; i <= static_cast<int>(PathType::NET); ++i)
    if (strcasecmp(text.c_str(), pathTypeName(static_cast<PathType>(i))) == 0) {
      *out = static_cast<PathType>(i);
      return true;
    }
  return false;
}

int resourceCount(const Topology& t) { return 2 * static_cast<int>(t.links.size()) + static_cast<int>(t.nodes.size()); }

std::vector<double> resourceCapacity(const Topology& t) {
  std::vector<double> cap(resourceCount(t), 0);
  for (size_t l = 0; l < t.links.size(); ++l) cap[2 * l] = cap[2 * l + 1] = t.links[l].bw;
  for (size_t n = 0; n < t.nodes.size(); ++n) {
    const Node& node = t.nodes[n];
    double local = node.kind == NodeKind::Cpu ? (node.memBw > 0 ? node.memBw : 20.0) : kGpuLocalBw;
    cap[nodeResource(t, static_cast<int>(n))] = local;
  }
  return cap;
}

std::string resourceName(const Topology& t, int r) {
  int links2 = 2 * static_cast<int>(t.links.size());
  if (r >= links2) return t.nodes[r - links2].id + " (local)";
  const Link& l = t.links[r / 2];
  const Node& a = t.nodes[r % 2 ? l.b : l.a];
  const Node& b = t.nodes[r % 2 ? l.a : l.b];
  return a.id + "->" + b.id;
}

PathMatrix computePaths(const Topology& t) {
  PathMatrix m;
  m.n = static_cast<int>(t.nodes.size());
  m.paths.assign(static_cast<size_t>(m.n) * m.n, Path());
  std::vector<std::vector<int>> adj(t.nodes.size());
  for (size_t l = 0; l < t.links.size(); ++l) {
    adj[t.links[l].a].push_back(static_cast<int>(l));
    adj[t.links[l].b].push_back(static_cast<int>(l));
  }
  std::vector<double> cap = resourceCapacity(t);
  for (int s = 0; s < m.n; ++s) {
    std::vector<Label> lab = search(t, adj, s);
    for (int d = 0; d < m.n; ++d) {
      Path& p = m.paths[static_cast<size_t>(s) * m.n + d];
      if (s == d) {
        p = Path{true, PathType::LOC, cap[nodeResource(t, s)], 0, {{nodeResource(t, s), 1.0}}};
        continue;
      }
      if (!lab[d].done || lab[d].prevLink < 0) continue;
      std::vector<int> nodes{d}, links;
      for (int v = d; v != s;) {
        int l = lab[v].prevLink;
        links.push_back(l);
        v = t.otherEnd(l, v);
        nodes.push_back(v);
      }
      std::reverse(nodes.begin(), nodes.end());
      std::reverse(links.begin(), links.end());
      p.valid = true;
      p.type = classify(t, nodes, links);
      if (p.type == PathType::NVL && t.nodes[s].kind == NodeKind::Gpu && t.nodes[d].kind == NodeKind::Gpu &&
          nvlinkBundle(t, adj, s, d, &p))
        continue;
      p.bw = lab[d].bw;
      p.hops = static_cast<int>(links.size());
      for (size_t i = 0; i < links.size(); ++i)
        p.route.push_back({linkResource(links[i], t.links[links[i]].a != nodes[i]), 1.0});
    }
  }
  return m;
}

int nearestCpu(const Topology& t, const PathMatrix& p, int node) {
  int best = -1;
  for (int c : t.ofKind(NodeKind::Cpu)) {
    const Path& x = p.at(node, c);
    if (!x.valid) continue;
    if (best < 0 || x.type < p.at(node, best).type ||
        (x.type == p.at(node, best).type && x.bw > p.at(node, best).bw))
      best = c;
  }
  return best;
}

}  // namespace gyre::topo
