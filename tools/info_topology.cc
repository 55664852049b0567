// gyre-info sections about the hardware: the topology tree, the path matrix
// and where the ranks sit.
#include <cstdio>
#include <functional>

#include "tools/info.h"
#include "src/topology/transport_policy.h"

namespace gyre::info {
namespace {

using topo::Node;
using topo::NodeKind;

std::string describe(const Node& n) {
  char buf[256];
  switch (n.kind) {
    case NodeKind::Cpu:
      snprintf(buf, sizeof(buf), "NUMA %d, package %d, %d cores, copy %.0f GB/s%s%s", n.index, n.package, n.cores,
               n.memBw, n.name.empty() ? "" : ", ", n.name.c_str());
      break;
    case NodeKind::Gpu:
      snprintf(buf, sizeof(buf), "CUDA device %d, sm%d, %s, %s", n.index, n.sm, n.name.c_str(), n.busId.c_str());
      break;
    case NodeKind::Nic:
      snprintf(buf, sizeof(buf), "%s %.0f Gb/s, netdev %s, %s%s%s", n.transport.c_str(), n.speed * 8,
               n.netdev.empty() ? "-" : n.netdev.c_str(), n.busId.c_str(), n.name.empty() ? "" : ", ",
               n.name.c_str());
      break;
    case NodeKind::Pci:
      snprintf(buf, sizeof(buf), "PCIe switch %s%s%s", n.busId.c_str(), n.name.empty() ? "" : ", ", n.name.c_str());
      break;
    case NodeKind::NvSwitch: snprintf(buf, sizeof(buf), "NVSwitch %s", n.busId.c_str()); break;
  }
  return buf;
}

std::string cell(const topo::Path& p) {
  if (!p.valid) return "-";
  char buf[32];
  snprintf(buf, sizeof(buf), "%s %.0f", topo::pathTypeName(p.type), p.bw);
  return buf;
}

void matrix(const topo::HostModel& h, const std::vector<int>& rows, const std::vector<int>& cols) {
  printf("%-9s", "");
  for (int c : cols) printf(" %9.9s", h.topo.nodes[c].id.c_str());
  printf("\n");
  for (int r : rows) {
    printf("%-9.9s", h.topo.nodes[r].id.c_str());
    for (int c : cols) printf(" %9s", cell(h.paths.at(r, c)).c_str());
    printf("\n");
  }
}

}  // namespace

void printTopology(const Model& m) {
  const topo::Topology& t = m.placement.hosts[0].topo;
  printf("== Topology (%s)\n", m.source.c_str());
  printf("host %s: %zu CPU/NUMA nodes, %zu GPUs, %zu NICs, %zu PCIe switches, %zu NVSwitches\n",
         t.host.empty() ? "?" : t.host.c_str(), t.ofKind(NodeKind::Cpu).size(), t.ofKind(NodeKind::Gpu).size(),
         t.ofKind(NodeKind::Nic).size(), t.ofKind(NodeKind::Pci).size(), t.ofKind(NodeKind::NvSwitch).size());
  if (m.placement.hosts.size() > 1) printf("modelled as %zu identical hosts\n", m.placement.hosts.size());
  std::vector<bool> shown(t.nodes.size(), false), treeLink(t.links.size(), false);
  std::function<void(int, int, int)> show = [&](int n, int depth, int up) {
    shown[n] = true;
    printf("%*s%-8s %s", depth * 2 + 2, "", t.nodes[n].id.c_str(), describe(t.nodes[n]).c_str());
    if (up >= 0) printf("  [%.0f GB/s up]", t.links[up].bw);
    printf("\n");
    for (int l : t.linksOf(n)) {
      int c = t.otherEnd(l, n);
      if (t.links[l].type != topo::LinkType::Pci || shown[c] || t.nodes[c].kind == NodeKind::Cpu) continue;
      treeLink[l] = true;
      show(c, depth + 1, l);
    }
  };
  for (int c : t.ofKind(NodeKind::Cpu)) show(c, 0, -1);
  for (size_t n = 0; n < t.nodes.size(); ++n)
    if (!shown[n]) show(static_cast<int>(n), 0, -1);
  printf("  other links:\n");
  for (size_t l = 0; l < t.links.size(); ++l) {
    if (treeLink[l]) continue;
    const topo::Link& k = t.links[l];
    printf("    %-8s - %-8s %-6s x%-2d %7.1f GB/s\n", t.nodes[k.a].id.c_str(), t.nodes[k.b].id.c_str(),
           topo::linkTypeName(k.type), k.count, k.bw);
  }
}

void printPaths(const Model& m) {
  const topo::HostModel& h = m.placement.hosts[0];
  std::vector<int> gpus = h.topo.ofKind(NodeKind::Gpu), nics = h.topo.ofKind(NodeKind::Nic),
                   cpus = h.topo.ofKind(NodeKind::Cpu);
  printf("\n== Paths inside a host (type, bottleneck GB/s)\n");
  std::vector<int> rows = gpus.empty() ? cpus : gpus;
  matrix(h, rows, rows);
  std::vector<int> others = nics;
  if (!gpus.empty()) others.insert(others.end(), cpus.begin(), cpus.end());
  if (!others.empty()) {
    printf("\n");
    matrix(h, rows, others);
  }
  if (m.placement.hosts.size() > 1) printf("\nbetween hosts: NET %.1f GB/s (fastest NIC)\n", topo::hostNetBw(h.topo));
  topo::TransportPolicy pol;
  if (topo::readTransportPolicy(&pol) != ncclSuccess) return;  // validateAll already reported it
  printf("\ntransport per pair with these settings (NCCL_P2P_LEVEL=%s, NCCL_P2P_DISABLE=%d, NCCL_SHM_DISABLE=%d):\n",
         topo::pathTypeName(pol.p2pLevel), pol.p2pDisable, pol.shmDisable);
  printf("%-9s", "");
  for (int c : rows) printf(" %5.5s", h.topo.nodes[c].id.c_str());
  printf("\n");
  for (int r : rows) {
    printf("%-9.9s", h.topo.nodes[r].id.c_str());
    for (int c : rows)
      printf(" %5s", topo::edgeTransportName(topo::chooseEdgeTransport(h.paths.at(r, c), !gpus.empty(), pol)));
    printf("\n");
  }
  if (!gpus.empty() && !nics.empty()) {
    printf("GPUDirect RDMA (NCCL_NET_GDR_LEVEL=%s):", topo::pathTypeName(pol.gdrLevel));
    for (int g : gpus) {
      std::string ok;
      for (int n : nics)
        if (topo::gdrAllowed(h.paths.at(g, n), pol)) ok += (ok.empty() ? "" : ",") + h.topo.nodes[n].id;
      printf(" %s->%s", h.topo.nodes[g].id.c_str(), ok.empty() ? "none" : ok.c_str());
    }
    printf("\n");
  }
}

void printPlacement(const Model& m) {
  const topo::Placement& p = m.placement;
  printf("\n== Ranks (%zu on %zu hosts)\n", p.ranks.size(), p.hosts.size());
  std::vector<std::vector<int>> byHost = topo::ranksByHost(p);
  for (size_t h = 0; h < byHost.size(); ++h) {
    printf("host %zu:", h);
    for (int r : byHost[h]) printf(" %d@%s", r, p.hosts[h].topo.nodes[topo::rankNode(p, r)].id.c_str());
    printf("\n");
  }
}

}  // namespace gyre::info
