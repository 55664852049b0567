// Writing the model as the topology schema (documented in xml.h).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "src/debug/error.h"
#include "src/topology/xml.h"

namespace gyre::topo {
namespace {

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// The element for node `n` with its PCI subtree; `used` marks tree links.
XmlElement nodeElement(const Topology& t, int n, int upLink, std::vector<bool>* placed, std::vector<bool>* used) {
  const Node& node = t.nodes[n];
  XmlElement e;
  e.name = kindName(node.kind);
  e.set("id", node.id);
  switch (node.kind) {
    case NodeKind::Cpu:
      e.set("numa", std::to_string(node.index));
      if (node.package >= 0) e.set("package", std::to_string(node.package));
      if (node.cores > 0) e.set("cores", std::to_string(node.cores));
      if (node.memBw > 0) e.set("membw", num(node.memBw));
      break;
    case NodeKind::Gpu:
      e.set("dev", std::to_string(node.index));
      if (node.sm > 0) e.set("sm", std::to_string(node.sm));
      break;
    case NodeKind::Nic:
      e.set("gbps", num(node.speed * 8));
      if (!node.netdev.empty()) e.set("netdev", node.netdev);
      e.set("transport", node.transport.empty() ? "eth" : node.transport);
      e.set("port", std::to_string(node.port));
      break;
    default: break;
  }
  if (!node.busId.empty()) e.set("busid", node.busId);
  if (!node.name.empty()) e.set("name", node.name);
  if (upLink >= 0) e.set("bw", num(t.links[upLink].bw));
  (*placed)[n] = true;
  if (node.kind == NodeKind::Cpu || node.kind == NodeKind::Pci) {
    for (int l : t.linksOf(n)) {
      int c = t.otherEnd(l, n);
      NodeKind ck = t.nodes[c].kind;
      bool child = t.links[l].type == LinkType::Pci && !(*placed)[c] &&
                   (ck == NodeKind::Pci || ck == NodeKind::Gpu || ck == NodeKind::Nic);
      if (!child) continue;
      (*used)[l] = true;
      e.children.push_back(nodeElement(t, c, l, placed, used));
    }
  }
  return e;
}

}  // namespace

XmlElement topologyToXml(const Topology& t) {
  XmlElement root;
  root.name = "topology";
  root.set("version", "1");
  if (!t.host.empty()) root.set("host", t.host);
  std::vector<bool> placed(t.nodes.size(), false), used(t.links.size(), false);
  for (int c : t.ofKind(NodeKind::Cpu)) root.children.push_back(nodeElement(t, c, -1, &placed, &used));
  // Nodes outside every CPU's PCI tree (NVSwitches; a GPU known only through
  // NVLink) stand at top level, joined by <link> elements.
  for (size_t n = 0; n < t.nodes.size(); ++n)
    if (!placed[n]) root.children.push_back(nodeElement(t, static_cast<int>(n), -1, &placed, &used));
  for (size_t l = 0; l < t.links.size(); ++l) {
    if (used[l]) continue;
    const Link& k = t.links[l];
    XmlElement e;
    e.name = "link";
    e.set("a", t.nodes[k.a].id);
    e.set("b", t.nodes[k.b].id);
    e.set("type", linkTypeName(k.type));
    if (k.count > 1 || k.type == LinkType::NvLink) e.set("count", std::to_string(k.count));
    e.set("bw", num(k.bw));
    root.children.push_back(e);
  }
  return root;
}

ncclResult_t dumpTopologyFile(const Topology& t, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fail(ncclSystemError, "cannot write topology file %s: %s", path.c_str(), strerror(errno));
  out << writeXml(topologyToXml(t));
  out.close();
  if (!out) return fail(ncclSystemError, "writing topology file %s failed", path.c_str());
  return ncclSuccess;
}

}  // namespace gyre::topo
