#include "src/plan/ring_order.h"

#include <algorithm>
#include <limits>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/plan/ring_segment.h"

namespace gyre {
namespace {

constexpr double kGpuChannelBw = 24.0;
constexpr double kHostChannelBw = 8.0;
// One more channel must add at least this fraction of bandwidth to be worth
// its buffers and threads.
constexpr double kChannelGain = 0.01;

struct Limits {
  double intra = std::numeric_limits<double>::infinity();
  double net = std::numeric_limits<double>::infinity();
};

// The smallest share any loaded wire or port gives each of the channels using it.
Limits shares(const std::vector<ring::HostState>& hosts) {
  Limits l;
  for (const ring::HostState& h : hosts)
    for (size_t r = 0; r < h.load.size(); ++r) {
      if (h.load[r] <= 0) continue;
      double s = h.cap[r] / h.load[r];
      if (static_cast<int>(r) >= h.portBase) l.net = std::min(l.net, s);
      else l.intra = std::min(l.intra, s);
    }
  return l;
}

}  // namespace

ncclResult_t buildRings(const topo::Placement& p, const RingOptions& opts, RingPlan* out) {
  GYRE_CHECK(topo::validatePlacement(p));
  if (opts.minChannels < 1 || opts.maxChannels < opts.minChannels)
    return fail(ncclInvalidArgument, "ring search: channel limits %d..%d are not a valid range", opts.minChannels,
                opts.maxChannels);
  *out = RingPlan();
  std::vector<std::vector<int>> byHost = topo::ranksByHost(p);
  std::vector<int> used;
  for (size_t h = 0; h < byHost.size(); ++h)
    if (!byHost[h].empty()) used.push_back(static_cast<int>(h));
  bool anyGpu = std::any_of(p.ranks.begin(), p.ranks.end(), [](const topo::RankSite& s) { return s.gpu >= 0; });
  double channelBw = opts.channelBw > 0 ? opts.channelBw : (anyGpu ? kGpuChannelBw : kHostChannelBw);
  out->nhosts = static_cast<int>(used.size());
  bool cycle = used.size() == 1;

  std::vector<ring::HostState> states;
  for (int h : used) states.push_back(ring::makeHostState(p, h, byHost[h]));
  if (p.ranks.size() == 1) {
    RingChannel ch;
    ch.order = {0};
    ch.entryNic.assign(p.hosts.size(), -1);
    ch.exitNic.assign(p.hosts.size(), -1);
    out->channels.assign(opts.minChannels, ch);
    out->channelBw = channelBw;
    out->totalBw = out->intraBw = channelBw * opts.minChannels;
    return ncclSuccess;
  }

  std::vector<RingChannel> chans;
  std::vector<Limits> limits;  // after 1, 2, ... channels
  double bestSoFar = 0;
  int stale = 0;
  for (int c = 0; c < opts.maxChannels; ++c) {
    RingChannel ch;
    ch.entryNic.assign(p.hosts.size(), -1);
    ch.exitNic.assign(p.hosts.size(), -1);
    for (size_t i = 0; i < states.size(); ++i) {
      ring::HostState& h = states[i];
      ring::Segment s = ring::searchSegment(h, cycle, c);
      ring::commitSegment(&h, s, cycle);
      for (int l : s.order) ch.order.push_back(h.ranks[l]);
      if (!cycle && !h.nics.empty()) {
        ch.entryNic[used[i]] = h.nics[s.entryNic];
        ch.exitNic[used[i]] = h.nics[s.exitNic];
      }
    }
    chans.push_back(std::move(ch));
    limits.push_back(shares(states));
    // Once the wires are shared out, more channels only split them further:
    // stop after two channels that add nothing (the count is chosen below).
    const Limits& l = limits.back();
    double total = (c + 1) * std::min({channelBw, l.intra, l.net});
    if (total > bestSoFar * (1 + kChannelGain)) {
      bestSoFar = total;
      stale = 0;
    } else if (++stale >= 2 && c + 1 >= opts.minChannels) {
      break;
    }
  }

  // Channel count: the prefix of channels with the most total bandwidth.
  int bestK = opts.minChannels;
  double bestTotal = -1;
  for (int k = opts.minChannels; k <= static_cast<int>(limits.size()); ++k) {
    const Limits& l = limits[k - 1];
    double total = k * std::min({channelBw, l.intra, l.net});
    if (bestTotal < 0 || total > bestTotal * (1 + kChannelGain)) {
      bestTotal = total;
      bestK = k;
    }
  }
  const Limits& l = limits[bestK - 1];
  chans.resize(bestK);
  out->channels = std::move(chans);
  out->channelBw = std::min({channelBw, l.intra, l.net});
  out->totalBw = bestK * out->channelBw;
  out->intraBw = bestK * std::min(channelBw, l.intra);
  out->netBw = cycle ? 0 : bestK * std::min(channelBw, l.net);
  for (const RingChannel& ch : out->channels)
    for (size_t i = 0; i < ch.order.size(); ++i) {
      int a = ch.order[i], b = ch.order[(i + 1) % ch.order.size()];
      topo::Path path = topo::rankPath(p, a, b);
      if (path.type != topo::PathType::NET) out->worstIntra = std::max(out->worstIntra, path.type);
    }
  return ncclSuccess;
}

void logRings(const topo::Placement& p, const RingPlan& plan) {
  if (logLevel() < LogLevel::Info) return;
  GYRE_INFO("GRAPH", "%zu ring channels x %.1f GB/s = %.1f GB/s per rank over %d host(s); farthest hop inside a host %s",
            plan.channels.size(), plan.channelBw, plan.totalBw, plan.nhosts, topo::pathTypeName(plan.worstIntra));
  for (size_t c = 0; c < plan.channels.size(); ++c) {
    // The ring, then the same order grouped by host ("[0 1] [2 3]"), so the
    // log shows where the ring crosses from one host to the next.
    std::string order, hosts;
    const std::vector<int>& ring = plan.channels[c].order;
    for (size_t i = 0; i < ring.size(); ++i) {
      const int r = ring[i];
      order += ' ';
      order += std::to_string(r);
      const bool first = i == 0 || p.ranks[ring[i - 1]].host != p.ranks[r].host;
      const bool last = i + 1 == ring.size() || p.ranks[ring[i + 1]].host != p.ranks[r].host;
      hosts += first ? (hosts.empty() ? "[" : " [") : " ";
      hosts += std::to_string(r);
      if (last) hosts += ']';
    }
    GYRE_INFO("GRAPH", "channel %zu ring:%s (by host: %s)", c, order.c_str(), hosts.c_str());
  }
}

int countEdges(const topo::Placement& p, const std::vector<int>& order, topo::PathType t) {
  int n = 0;
  for (size_t i = 0; i < order.size() && order.size() > 1; ++i)
    if (topo::rankPath(p, order[i], order[(i + 1) % order.size()]).type == t) ++n;
  return n;
}

}  // namespace gyre
