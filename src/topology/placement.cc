#include "src/topology/placement.h"

#include <algorithm>

#include "src/debug/error.h"

namespace gyre::topo {

HostModel makeHost(Topology t) {
  HostModel h;
  h.paths = computePaths(t);
  h.capacity = resourceCapacity(t);
  h.topo = std::move(t);
  return h;
}

Placement replicate(const Topology& t, int nhosts, int ranksPerHost) {
  Placement p;
  HostModel model = makeHost(t);
  std::vector<int> gpus = t.ofKind(NodeKind::Gpu), cpus = t.ofKind(NodeKind::Cpu);
  for (int h = 0; h < nhosts; ++h) {
    p.hosts.push_back(model);
    if (ranksPerHost == 0 && !gpus.empty()) {
      for (int g : gpus) p.ranks.push_back({h, t.nodes[g].index, -1});
      continue;
    }
    int n = ranksPerHost == 0 ? static_cast<int>(cpus.size()) : ranksPerHost;
    for (int r = 0; r < n; ++r) {
      int c = cpus[static_cast<size_t>(r) * cpus.size() / n];
      p.ranks.push_back({h, -1, t.nodes[c].index});
    }
  }
  return p;
}

ncclResult_t validatePlacement(const Placement& p) {
  if (p.ranks.empty()) return fail(ncclInvalidArgument, "placement has no ranks");
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const RankSite& s = p.ranks[r];
    if (s.host < 0 || s.host >= static_cast<int>(p.hosts.size()))
      return fail(ncclInvalidArgument, "rank %zu is placed on host %d of %zu", r, s.host, p.hosts.size());
    if (rankNode(p, static_cast<int>(r)) < 0)
      return fail(ncclInvalidArgument, "rank %zu uses %s %d, which host %d (%s) does not have", r,
                  s.gpu >= 0 ? "GPU" : "NUMA node", s.gpu >= 0 ? s.gpu : s.cpu, s.host,
                  p.hosts[s.host].topo.host.c_str());
  }
  return ncclSuccess;
}

int rankNode(const Placement& p, int rank) {
  const RankSite& s = p.ranks[rank];
  const Topology& t = p.hosts[s.host].topo;
  if (s.gpu >= 0) return t.gpuByDevice(s.gpu);
  std::vector<int> cpus = t.ofKind(NodeKind::Cpu);
  if (s.cpu < 0) return cpus.empty() ? -1 : cpus[0];
  for (int c : cpus)
    if (t.nodes[c].index == s.cpu) return c;
  return -1;
}

std::vector<std::vector<int>> ranksByHost(const Placement& p) {
  std::vector<std::vector<int>> out(p.hosts.size());
  for (size_t r = 0; r < p.ranks.size(); ++r) out[p.ranks[r].host].push_back(static_cast<int>(r));
  return out;
}

double hostNetBw(const Topology& t) {
  double best = 0;
  for (int n : t.ofKind(NodeKind::Nic)) best = std::max(best, t.nodes[n].speed);
  return best > 0 ? best : kAssumedNetBw;
}

Path rankPath(const Placement& p, int a, int b) {
  const RankSite& sa = p.ranks[a];
  const RankSite& sb = p.ranks[b];
  if (sa.host == sb.host) return p.hosts[sa.host].paths.at(rankNode(p, a), rankNode(p, b));
  Path net;
  net.valid = true;
  net.type = PathType::NET;
  net.bw = std::min(hostNetBw(p.hosts[sa.host].topo), hostNetBw(p.hosts[sb.host].topo));
  net.hops = 1;
  return net;
}

}  // namespace gyre::topo
