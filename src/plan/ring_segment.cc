#include "src/plan/ring_segment.h"

#include <algorithm>
#include <functional>
#include <limits>

namespace gyre::ring {
namespace {

using topo::NodeKind;
using topo::Path;
using topo::RouteUse;

constexpr double kEps = 1e-9;
constexpr int kInvalidPathPenalty = 16;  // an unconnected pair ranks below every real path type
constexpr double kInf = std::numeric_limits<double>::infinity();

// "Clearly less", so that bandwidths equal up to rounding count as ties.
bool less(double a, double b) { return a < b * (1 - kEps) && a < b - kEps; }

bool better(const Segment& a, const Segment& b) {
  if (less(b.bw, a.bw)) return true;
  if (less(a.bw, b.bw)) return false;
  if (a.typeSum != b.typeSum) return a.typeSum < b.typeSum;
  if (a.overlap != b.overlap) return a.overlap < b.overlap;
  if (a.order != b.order) return a.order < b.order;
  if (a.entryNic != b.entryNic) return a.entryNic < b.entryNic;
  return a.exitNic < b.exitNic;
}

// Preorder position of every node in the topology tree (CPUs in order, each
// with its PCI subtree), so sorting by it keeps each subtree contiguous.
std::vector<int> treeOrder(const topo::Topology& t) {
  std::vector<int> pos(t.nodes.size(), -1);
  int next = 0;
  std::function<void(int)> visit = [&](int n) {
    pos[n] = next++;
    for (int l : t.linksOf(n))
      if (t.links[l].type == topo::LinkType::Pci && pos[t.otherEnd(l, n)] < 0) visit(t.otherEnd(l, n));
  };
  for (int c : t.ofKind(NodeKind::Cpu)) visit(c);
  for (size_t n = 0; n < t.nodes.size(); ++n)
    if (pos[n] < 0) visit(static_cast<int>(n));
  return pos;
}

class Search {
 public:
  Search(const HostState& h, bool cycle) : h_(h), cycle_(cycle), m_(static_cast<int>(h.nodes.size())) {
    use_.assign(h.cap.size(), 0);
    taken_.assign(m_, false);
    // The nearest NIC of each rank bounds what entering and leaving can add,
    // which lets the search drop prefixes before it chooses NICs.
    int nports = h.nics.empty() ? 1 : static_cast<int>(h.nics.size());
    minAttach_.assign(m_, kInvalidPathPenalty);
    for (int i = 0; i < m_; ++i)
      for (int k = 0; k < nports; ++k) minAttach_[i] = std::min(minAttach_[i], attachType(i, k));
    minAttachAll_ = m_ > 0 ? *std::min_element(minAttach_.begin(), minAttach_.end()) : 0;
    // Entering and leaving each take a NIC port and a route to it, so a
    // path's bandwidth is at most the best such share for its first rank and
    // for any last rank.
    attachIn_.assign(m_, kInf);
    exitBound_ = kInf;
    if (!cycle) {
      exitBound_ = 0;
      for (int i = 0; i < m_; ++i) {
        double in = 0, out = 0;
        for (int k = 0; k < nports; ++k) {
          std::vector<RouteUse> r = attachRoute(i, k, true);
          in = std::max(in, addRoute(r, kInf));
          removeRoute(r);
          r = attachRoute(i, k, false);
          out = std::max(out, addRoute(r, kInf));
          removeRoute(r);
        }
        attachIn_[i] = in;
        exitBound_ = std::max(exitBound_, out);
      }
    }
    // Likewise every edge still to come costs at least the nearest pair's type.
    minEdge_ = kInvalidPathPenalty;
    for (int i = 0; i < m_; ++i)
      for (int j = 0; j < m_; ++j)
        if (i != j) minEdge_ = std::min(minEdge_, edgeType(i, j));
  }

  Segment exhaustive() {
    if (cycle_) {
      order_ = {0};
      taken_[0] = true;
      dfs(kInf, 0, 0);
    } else {
      for (int first = 0; first < m_; ++first) {
        order_ = {first};
        taken_[first] = true;
        dfs(kInf, 0, 0);
        taken_[first] = false;
      }
    }
    return best_;
  }

  Segment fixed(const std::vector<int>& order) {
    order_ = order;
    double bw = kInf;
    int typeSum = 0, overlap = 0;
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      bw = addEdge(order[i], order[i + 1], bw);
      typeSum += edgeType(order[i], order[i + 1]);
      overlap += edgeOverlap(order[i], order[i + 1]);
    }
    leaf(bw, typeSum, overlap);
    return best_;
  }

 private:
  const HostState& h_;
  bool cycle_;
  int m_;
  std::vector<double> use_;
  std::vector<int> order_;
  std::vector<bool> taken_;
  Segment best_;
  bool have_ = false;
  std::vector<int> minAttach_;
  int minAttachAll_ = 0;
  int minEdge_ = 0;
  std::vector<double> attachIn_;
  double exitBound_ = kInf;

  const Path& path(int fromNode, int toNode) const { return h_.model->paths.at(fromNode, toNode); }

  double share(int r) const { return h_.cap[r] / (h_.load[r] + use_[r]); }

  double addRoute(const std::vector<RouteUse>& route, double bw) {
    for (const RouteUse& u : route) {
      use_[u.resource] += u.share;
      bw = std::min(bw, share(u.resource));
    }
    return bw;
  }
  void removeRoute(const std::vector<RouteUse>& route) {
    for (const RouteUse& u : route) use_[u.resource] -= u.share;
  }
  double addEdge(int i, int j, double bw) {
    const Path& p = path(h_.nodes[i], h_.nodes[j]);
    return p.valid ? addRoute(p.route, bw) : 0;
  }
  void removeEdge(int i, int j) { removeRoute(path(h_.nodes[i], h_.nodes[j]).route); }
  int edgeType(int i, int j) const {
    const Path& p = path(h_.nodes[i], h_.nodes[j]);
    return p.valid ? static_cast<int>(p.type) : kInvalidPathPenalty;
  }
  int edgeOverlap(int i, int j) const {
    auto it = h_.usedEdges.find({i, j});
    return it == h_.usedEdges.end() ? 0 : it->second;
  }

  // A NIC port plus the PCI route between it and the rank, as one route.
  std::vector<RouteUse> attachRoute(int local, int k, bool entry) const {
    std::vector<RouteUse> r;
    if (!h_.nics.empty()) {
      int nic = h_.nics[k];
      const Path& p = entry ? path(nic, h_.nodes[local]) : path(h_.nodes[local], nic);
      r = p.route;
    }
    r.push_back({h_.portBase + 2 * k + (entry ? 1 : 0), 1.0});
    return r;
  }
  int attachType(int local, int k) const {
    if (h_.nics.empty()) return static_cast<int>(topo::PathType::SYS);
    const Path& p = path(h_.nodes[local], h_.nics[k]);
    return p.valid ? static_cast<int>(p.type) : kInvalidPathPenalty;
  }

  // The NIC for entering (or leaving) at `local`: least loaded port, then the
  // nearest, then the lowest index.
  int bestNic(int local, bool entry) {
    int nports = h_.nics.empty() ? 1 : static_cast<int>(h_.nics.size());
    int best = -1;
    double bestShare = 0;
    for (int k = 0; k < nports; ++k) {
      std::vector<RouteUse> r = attachRoute(local, k, entry);
      double s = addRoute(r, kInf);
      removeRoute(r);
      if (best < 0 || less(bestShare, s) ||
          (!less(s, bestShare) && attachType(local, k) < attachType(local, best))) {
        best = k;
        bestShare = s;
      }
    }
    return best;
  }

  void leaf(double bw, int typeSum, int overlap) {
    Segment s;
    s.order = order_;
    if (cycle_) {
      if (m_ > 1) {
        bw = addEdge(order_.back(), order_.front(), bw);
        typeSum += edgeType(order_.back(), order_.front());
        overlap += edgeOverlap(order_.back(), order_.front());
        removeEdge(order_.back(), order_.front());
      }
    } else {
      s.entryNic = bestNic(order_.front(), true);
      std::vector<RouteUse> in = attachRoute(order_.front(), s.entryNic, true);
      bw = addRoute(in, bw);
      s.exitNic = bestNic(order_.back(), false);
      std::vector<RouteUse> out = attachRoute(order_.back(), s.exitNic, false);
      bw = addRoute(out, bw);
      removeRoute(out);
      removeRoute(in);
      typeSum += attachType(order_.front(), s.entryNic) + attachType(order_.back(), s.exitNic);
    }
    s.bw = bw;
    s.typeSum = typeSum;
    s.overlap = overlap;
    if (!have_ || better(s, best_)) {
      best_ = s;
      have_ = true;
    }
  }

  void dfs(double bw, int typeSum, int overlap) {
    // Every measure only gets worse as edges are added and candidates come in
    // lexicographic order, so a prefix that cannot beat the best is dropped.
    int edgesLeft = m_ - static_cast<int>(order_.size()) + (cycle_ && m_ > 1 ? 1 : 0);
    int bound = typeSum + edgesLeft * minEdge_ + (cycle_ ? 0 : minAttach_[order_.front()] + minAttachAll_);
    double bwBound = std::min({bw, attachIn_[order_.front()], exitBound_});
    if (have_ && !less(best_.bw, bwBound) &&
        (less(bwBound, best_.bw) || bound > best_.typeSum || (bound == best_.typeSum && overlap >= best_.overlap)))
      return;
    if (static_cast<int>(order_.size()) == m_) {
      leaf(bw, typeSum, overlap);
      return;
    }
    int last = order_.back();
    for (int next = 0; next < m_; ++next) {
      if (taken_[next]) continue;
      double nbw = addEdge(last, next, bw);
      taken_[next] = true;
      order_.push_back(next);
      dfs(nbw, typeSum + edgeType(last, next), overlap + edgeOverlap(last, next));
      order_.pop_back();
      taken_[next] = false;
      removeEdge(last, next);
    }
  }
};

}  // namespace

HostState makeHostState(const topo::Placement& p, int host, const std::vector<int>& ranks) {
  HostState h;
  h.model = &p.hosts[host];
  h.ranks = ranks;
  for (int r : ranks) h.nodes.push_back(topo::rankNode(p, r));
  h.nics = h.model->topo.ofKind(NodeKind::Nic);
  h.cap = h.model->capacity;
  h.portBase = static_cast<int>(h.cap.size());
  if (h.nics.empty()) {
    h.cap.push_back(topo::kAssumedNetBw);
    h.cap.push_back(topo::kAssumedNetBw);
  }
  for (int n : h.nics) {
    h.cap.push_back(h.model->topo.nodes[n].speed);
    h.cap.push_back(h.model->topo.nodes[n].speed);
  }
  h.load.assign(h.cap.size(), 0);
  return h;
}

Segment searchSegment(const HostState& h, bool cycle, int channel) {
  Search s(h, cycle);
  int m = static_cast<int>(h.nodes.size());
  if (m <= (cycle ? kExactCycle : kExactPath)) return s.exhaustive();
  // Large hosts: walk the topology tree so every subtree is entered and left
  // once (the fewest crossings of each link a cycle can have); alternate the
  // direction per channel so both directions of every link carry traffic.
  std::vector<int> pos = treeOrder(h.model->topo);
  std::vector<int> order(m);
  for (int i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pos[h.nodes[a]] < pos[h.nodes[b]]; });
  if (channel % 2) std::reverse(order.begin() + (cycle ? 1 : 0), order.end());
  return s.fixed(order);
}

std::vector<std::pair<int, double>> segmentUsage(const HostState& h, const Segment& s, bool cycle) {
  std::vector<std::pair<int, double>> out;
  auto route = [&](int from, int to) {
    const Path& p = h.model->paths.at(from, to);
    for (const RouteUse& u : p.route) out.emplace_back(u.resource, u.share);
  };
  const std::vector<int>& o = s.order;
  for (size_t i = 0; i + 1 < o.size(); ++i) route(h.nodes[o[i]], h.nodes[o[i + 1]]);
  if (cycle && o.size() > 1) route(h.nodes[o.back()], h.nodes[o.front()]);
  if (!cycle) {
    if (!h.nics.empty()) {
      route(h.nics[s.entryNic], h.nodes[o.front()]);
      route(h.nodes[o.back()], h.nics[s.exitNic]);
    }
    out.emplace_back(h.portBase + 2 * s.entryNic + 1, 1.0);
    out.emplace_back(h.portBase + 2 * s.exitNic, 1.0);
  }
  return out;
}

void commitSegment(HostState* h, const Segment& s, bool cycle) {
  for (const auto& [r, share] : segmentUsage(*h, s, cycle)) h->load[r] += share;
  const std::vector<int>& o = s.order;
  for (size_t i = 0; i + 1 < o.size(); ++i) ++h->usedEdges[{o[i], o[i + 1]}];
  if (cycle && o.size() > 1) ++h->usedEdges[{o.back(), o.front()}];
}

}  // namespace gyre::ring
