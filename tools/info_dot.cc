// gyre-info --dot: the hosts as Graphviz clusters (CPUs, PCIe switches, GPUs,
// NICs, NVSwitches and their links in gray), the ring of each drawn channel as
// colored arrows between ranks, the network hops between NICs, and for
// several hosts the two inter-host trees as dashed arrows (child to parent).
#include <cstdio>
#include <map>

#include "tools/info.h"

namespace gyre::info {
namespace {

using topo::NodeKind;

const char* kColors[] = {"#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#a65628", "#f781bf", "#17becf"};
const char* kColorNames[] = {"red", "blue", "green", "purple", "orange", "brown", "pink", "cyan"};

std::string linkLabel(const topo::Link& l) {
  char buf[48];
  if (l.type == topo::LinkType::NvLink) snprintf(buf, sizeof(buf), "nvl x%d", l.count);
  else if (l.type == topo::LinkType::Smp) snprintf(buf, sizeof(buf), "smp %.0f", l.bw);
  else snprintf(buf, sizeof(buf), "%.0f", l.bw);
  return buf;
}

std::string id(int host, const std::string& node) {
  std::string s = "h";
  s += std::to_string(host);
  s += '_';
  for (char c : node) s += isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return s;
}

const char* style(NodeKind k) {
  switch (k) {
    case NodeKind::Cpu: return "shape=box, style=filled, fillcolor=\"#dde7f7\"";
    case NodeKind::Gpu: return "shape=box, style=\"filled,bold\", fillcolor=\"#c8f0c8\"";
    case NodeKind::Nic: return "shape=hexagon, style=filled, fillcolor=\"#fde3c0\"";
    case NodeKind::NvSwitch: return "shape=octagon, style=filled, fillcolor=\"#e6d5f2\"";
    default: return "shape=ellipse, style=filled, fillcolor=\"#eeeeee\", fontsize=8";
  }
}

}  // namespace

bool writeDot(const Model& m, const std::string& path, int maxChannels) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) return false;
  const topo::Placement& p = m.placement;
  std::vector<std::vector<int>> byHost = topo::ranksByHost(p);
  // A rank is drawn on its device when it is alone there, else as its own circle.
  std::map<int, int> ranksOnNode;  // host * 65536 + node -> count
  for (size_t r = 0; r < p.ranks.size(); ++r) ++ranksOnNode[p.ranks[r].host * 65536 + topo::rankNode(p, static_cast<int>(r))];
  auto rankId = [&](int r) {
    int h = p.ranks[r].host, n = topo::rankNode(p, r);
    return ranksOnNode[h * 65536 + n] == 1 ? id(h, p.hosts[h].topo.nodes[n].id) : id(h, "rank" + std::to_string(r));
  };

  fprintf(f, "digraph gyre {\n  compound=true; newrank=true; fontname=\"Helvetica\";\n");
  fprintf(f, "  node [fontname=\"Helvetica\", fontsize=10]; edge [fontname=\"Helvetica\", fontsize=8];\n");
  int drawn = std::min<int>(maxChannels, static_cast<int>(m.rings.channels.size()));
  std::string legend;
  for (int c = 0; c < drawn; ++c) legend += (c ? ", " : "") + std::string("ring ") + std::to_string(c) + " " + kColorNames[c % 8];
  fprintf(f, "  label=\"gyre-info: %zu ranks, %zu ring channels, %.1f GB/s per rank\\n%s%s\"; labelloc=t;\n",
          p.ranks.size(), m.rings.channels.size(), m.rings.totalBw, legend.c_str(),
          m.rings.nhosts > 1 ? "; dashed: trees 0 and 1 between hosts (child to parent)" : "");
  for (size_t h = 0; h < p.hosts.size(); ++h) {
    const topo::Topology& t = p.hosts[h].topo;
    fprintf(f, "  subgraph cluster_h%zu {\n    label=\"host %zu (%s)\"; color=\"#888888\";\n", h, h, t.host.c_str());
    for (size_t n = 0; n < t.nodes.size(); ++n) {
      const topo::Node& node = t.nodes[n];
      std::string label = node.id;
      if (node.kind == NodeKind::Nic) label += "\\n" + std::to_string(static_cast<int>(node.speed * 8)) + " Gb/s";
      for (int r : byHost[h])
        if (topo::rankNode(p, r) == static_cast<int>(n) && ranksOnNode[static_cast<int>(h) * 65536 + static_cast<int>(n)] == 1)
          label += "\\nrank " + std::to_string(r);
      fprintf(f, "    %s [%s, label=\"%s\"];\n", id(static_cast<int>(h), node.id).c_str(), style(node.kind), label.c_str());
    }
    for (int r : byHost[h]) {
      int n = topo::rankNode(p, r);
      if (ranksOnNode[static_cast<int>(h) * 65536 + n] == 1) continue;
      fprintf(f, "    %s [shape=circle, fontsize=9, label=\"%d\"];\n", rankId(r).c_str(), r);
      fprintf(f, "    %s -> %s [dir=none, style=dotted];\n", rankId(r).c_str(), id(static_cast<int>(h), t.nodes[n].id).c_str());
    }
    for (const topo::Link& l : t.links)
      fprintf(f, "    %s -> %s [dir=none, color=\"#aaaaaa\", penwidth=%d, label=\"%s\", fontcolor=\"#777777\"];\n",
              id(static_cast<int>(h), t.nodes[l.a].id).c_str(), id(static_cast<int>(h), t.nodes[l.b].id).c_str(),
              l.type == topo::LinkType::NvLink ? 2 : 1, linkLabel(l).c_str());
    fprintf(f, "  }\n");
  }
  for (int c = 0; c < drawn; ++c) {
    const RingChannel& ch = m.rings.channels[c];
    const char* color = kColors[c % 8];
    for (size_t i = 0; i < ch.order.size() && ch.order.size() > 1; ++i) {
      int a = ch.order[i], b = ch.order[(i + 1) % ch.order.size()];
      int ha = p.ranks[a].host, hb = p.ranks[b].host;
      if (ha == hb) {
        fprintf(f, "  %s -> %s [color=\"%s\", penwidth=2, constraint=false];\n", rankId(a).c_str(),
                rankId(b).c_str(), color);
        continue;
      }
      // Leaving a host: rank -> exit NIC -> (network) -> entry NIC -> rank.
      std::string out = ch.exitNic[ha] >= 0 ? id(ha, p.hosts[ha].topo.nodes[ch.exitNic[ha]].id) : rankId(a);
      std::string in = ch.entryNic[hb] >= 0 ? id(hb, p.hosts[hb].topo.nodes[ch.entryNic[hb]].id) : rankId(b);
      if (out != rankId(a)) fprintf(f, "  %s -> %s [color=\"%s\", penwidth=2, constraint=false];\n", rankId(a).c_str(), out.c_str(), color);
      fprintf(f, "  %s -> %s [color=\"%s\", penwidth=3, style=bold, constraint=false, label=\"net\", fontcolor=\"%s\"];\n",
              out.c_str(), in.c_str(), color, color);
      if (in != rankId(b)) fprintf(f, "  %s -> %s [color=\"%s\", penwidth=2, constraint=false];\n", in.c_str(), rankId(b).c_str(), color);
    }
  }
  if (m.rings.nhosts > 1)
    for (size_t c = 0; c < std::min<size_t>(2, m.trees.channels.size()); ++c) {
      const TreeChannel& tc = m.trees.channels[c];
      for (size_t r = 0; r < tc.ranks.size(); ++r) {
        int parent = tc.ranks[r].parent;
        if (parent < 0 || p.ranks[parent].host == p.ranks[r].host) continue;
        fprintf(f, "  %s -> %s [style=dashed, color=\"%s\", constraint=false, label=\"tree %d\"];\n",
                rankId(static_cast<int>(r)).c_str(), rankId(parent).c_str(), c ? "#555555" : "#000000", tc.tree);
      }
    }
  fprintf(f, "}\n");
  return fclose(f) == 0;
}

}  // namespace gyre::info
