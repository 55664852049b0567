#include "src/topology/model.h"

#include <algorithm>
#include <set>

#include "src/debug/error.h"

namespace gyre::topo {

const char* kindName(NodeKind k) {
  switch (k) {
    case NodeKind::Cpu: return "cpu";
    case NodeKind::Pci: return "pci";
    case NodeKind::Gpu: return "gpu";
    case NodeKind::Nic: return "nic";
    case NodeKind::NvSwitch: return "nvswitch";
  }
  return "?";
}

const char* linkTypeName(LinkType t) {
  switch (t) {
    case LinkType::Pci: return "pci";
    case LinkType::Smp: return "smp";
    case LinkType::NvLink: return "nvlink";
  }
  return "?";
}

int Topology::addNode(Node n) {
  nodes.push_back(std::move(n));
  return static_cast<int>(nodes.size()) - 1;
}

int Topology::addLink(int a, int b, LinkType type, double bw, int count) {
  links.push_back(Link{a, b, type, bw, count});
  return static_cast<int>(links.size()) - 1;
}

int Topology::find(const std::string& id) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].id == id) return static_cast<int>(i);
  return -1;
}

std::vector<int> Topology::ofKind(NodeKind k) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind == k) out.push_back(static_cast<int>(i));
  std::stable_sort(out.begin(), out.end(), [&](int x, int y) {
    if (nodes[x].index != nodes[y].index) return nodes[x].index < nodes[y].index;
    return nodes[x].id < nodes[y].id;
  });
  return out;
}

std::vector<int> Topology::linksOf(int n) const {
  std::vector<int> out;
  for (size_t i = 0; i < links.size(); ++i)
    if (links[i].a == n || links[i].b == n) out.push_back(static_cast<int>(i));
  return out;
}

int Topology::gpuByDevice(int dev) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind == NodeKind::Gpu && nodes[i].index == dev) return static_cast<int>(i);
  return -1;
}

ncclResult_t validate(const Topology& t, const char* origin) {
  std::set<std::string> ids;
  std::set<int> gpuDevs;
  bool haveCpu = false;
  for (const Node& n : t.nodes) {
    if (n.id.empty()) return fail(ncclInvalidArgument, "%s: a %s node has no id", origin, kindName(n.kind));
    if (!ids.insert(n.id).second) return fail(ncclInvalidArgument, "%s: node id \"%s\" is used twice", origin, n.id.c_str());
    if (n.kind == NodeKind::Cpu) haveCpu = true;
    if (n.kind == NodeKind::Gpu && (n.index < 0 || !gpuDevs.insert(n.index).second))
      return fail(ncclInvalidArgument, "%s: gpu \"%s\" needs a unique dev >= 0 (has %d)", origin, n.id.c_str(), n.index);
    if (n.kind == NodeKind::Nic && n.speed <= 0)
      return fail(ncclInvalidArgument, "%s: nic \"%s\" has no port speed", origin, n.id.c_str());
  }
  if (!haveCpu) return fail(ncclInvalidArgument, "%s: the topology has no cpu node", origin);
  int nn = static_cast<int>(t.nodes.size());
  std::vector<bool> linked(t.nodes.size(), false);
  for (const Link& l : t.links) {
    if (l.a < 0 || l.b < 0 || l.a >= nn || l.b >= nn || l.a == l.b)
      return fail(ncclInvalidArgument, "%s: a link joins invalid nodes (%d, %d)", origin, l.a, l.b);
    if (!(l.bw > 0))
      return fail(ncclInvalidArgument, "%s: link %s-%s has no positive bandwidth", origin, t.nodes[l.a].id.c_str(),
                  t.nodes[l.b].id.c_str());
    linked[l.a] = linked[l.b] = true;
  }
  for (int i = 0; i < nn; ++i) {
    NodeKind k = t.nodes[i].kind;
    if ((k == NodeKind::Gpu || k == NodeKind::Nic) && !linked[i])
      return fail(ncclInvalidArgument, "%s: %s \"%s\" is not connected to anything", origin, kindName(k),
                  t.nodes[i].id.c_str());
  }
  return ncclSuccess;
}

double nvlinkLaneBw(int sm) {
  if (sm >= 100) return 40.0;
  if (sm >= 90) return 20.6;
  if (sm >= 70) return 20.0;
  if (sm >= 60) return 18.0;
  return 20.0;
}

double pciBw(int gen, int width) {
  // Raw GB/s per lane by generation; each generation doubles from Gen3's 0.985.
  static const double kLane[] = {0, 0.25, 0.5, 0.985, 1.97, 3.94, 7.88};
  if (gen < 1) gen = 4;
  if (gen > 6) gen = 6;
  if (width < 1) width = 16;
  return kLane[gen] * width * 0.75;
}

}  // namespace gyre::topo
