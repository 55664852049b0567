#include "src/topology/net_devices.h"

#include "src/bootstrap/interfaces.h"
#include "src/config/env.h"

namespace gyre::topo {
namespace {

bool nicUsable(const NetDeviceFilter& f, const Node& n) {
  bool bySocket = !n.netdev.empty() &&
                  (f.socketIfname.empty() || interfaceMatches(parseInterfaceFilter(f.socketIfname), n.netdev));
  bool byIb = false;
  if (f.haveIbTransport && n.transport == "ib") {
    InterfaceFilter hca = parseInterfaceFilter(f.ibHca);
    byIb = f.ibHca.empty() || interfaceMatches(hca, n.id) ||
           interfaceMatches(hca, n.id + ":" + std::to_string(n.port));
  }
  return bySocket || byIb;
}

}  // namespace

NetDeviceFilter netDeviceFilterFromSettings() {
  NetDeviceFilter f;
  f.socketIfname = env::getString("NCCL_SOCKET_IFNAME");
  f.ibHca = env::getString("NCCL_IB_HCA");
  return f;
}

std::vector<std::string> dropUnusableNics(const NetDeviceFilter& f, Topology* t) {
  std::vector<int> newIndex(t->nodes.size(), -1);
  std::vector<Node> kept;
  std::vector<std::string> dropped;
  for (size_t i = 0; i < t->nodes.size(); ++i) {
    const Node& n = t->nodes[i];
    if (n.kind == NodeKind::Nic && !nicUsable(f, n)) {
      dropped.push_back(n.id);
      continue;
    }
    newIndex[i] = static_cast<int>(kept.size());
    kept.push_back(n);
  }
  if (dropped.empty()) return dropped;
  std::vector<Link> links;
  for (Link l : t->links) {
    if (newIndex[l.a] < 0 || newIndex[l.b] < 0) continue;
    l.a = newIndex[l.a];
    l.b = newIndex[l.b];
    links.push_back(l);
  }
  t->nodes = std::move(kept);
  t->links = std::move(links);
  return dropped;
}

}  // namespace gyre::topo
