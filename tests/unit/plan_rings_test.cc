#include <algorithm>
#include <map>
#include <set>

#include "src/plan/ring_order.h"
#include "tests/unit/topology_fixtures.h"

using namespace gyre;
using topo::PathType;

namespace {

RingPlan plan(const topo::Placement& p, int maxChannels = 16) {
  RingOptions o;
  o.maxChannels = maxChannels;
  RingPlan r;
  REQUIRE(buildRings(p, o, &r) == ncclSuccess);
  return r;
}

// Each rank exactly once, in every channel.
void requireValid(const topo::Placement& p, const RingPlan& r) {
  REQUIRE_FALSE(r.channels.empty());
  for (const RingChannel& ch : r.channels) {
    std::vector<int> sorted = ch.order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> all(p.ranks.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    REQUIRE(sorted == all);
  }
}

// How many times a ring changes host: a ring that visits every host once
// changes exactly nhosts times (0 on one host).
int hostChanges(const topo::Placement& p, const std::vector<int>& order) {
  int n = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if (p.ranks[order[i]].host != p.ranks[order[(i + 1) % order.size()]].host) ++n;
  return n;
}

// No wire carries more than it can: summed over channels, each resource's
// traffic at the plan's per-channel bandwidth stays within its capacity.
void requireWithinCapacity(const topo::Placement& p, const RingPlan& r) {
  std::map<std::pair<int, int>, double> load;  // (host, resource) -> channels' share
  for (const RingChannel& ch : r.channels)
    for (size_t i = 0; i < ch.order.size(); ++i) {
      int a = ch.order[i], b = ch.order[(i + 1) % ch.order.size()];
      if (p.ranks[a].host != p.ranks[b].host) continue;
      const topo::HostModel& h = p.hosts[p.ranks[a].host];
      for (const topo::RouteUse& u : h.paths.at(topo::rankNode(p, a), topo::rankNode(p, b)).route)
        load[{p.ranks[a].host, u.resource}] += u.share;
    }
  for (const auto& [key, l] : load) CHECK(l * r.channelBw <= p.hosts[key.first].capacity[key.second] * (1 + 1e-9));
}

}  // namespace

TEST_CASE("rings on every shipped topology are valid, within capacity and deterministic") {
  for (const char* name : {"dgx_h100.xml", "pcie_4gpu_2socket.xml", "cpu_2socket.xml", "ci_vm.xml"})
    for (int hosts : {1, 2, 3}) {
      INFO(name << " x" << hosts);
      topo::Topology t = testing::loadShipped(name);
      int ranks = t.ofKind(topo::NodeKind::Gpu).empty() ? 4 : 0;
      topo::Placement p = topo::replicate(t, hosts, ranks);
      RingPlan r = plan(p);
      requireValid(p, r);
      requireWithinCapacity(p, r);
      CHECK(r.nhosts == hosts);
      CHECK(r.totalBw > 0);
      for (const RingChannel& ch : r.channels) CHECK(hostChanges(p, ch.order) == (hosts > 1 ? hosts : 0));
      RingPlan again = plan(p);
      REQUIRE(again.channels.size() == r.channels.size());
      for (size_t c = 0; c < r.channels.size(); ++c) CHECK(again.channels[c].order == r.channels[c].order);
    }
}

TEST_CASE("on the DGX-like box rings never leave NVLink inside a host") {
  topo::Topology t = testing::loadShipped("dgx_h100.xml");
  for (int hosts : {1, 2, 4}) {
    INFO(hosts << " hosts");
    topo::Placement p = topo::replicate(t, hosts, 0);
    RingPlan r = plan(p, 32);
    requireValid(p, r);
    for (const RingChannel& ch : r.channels)
      for (size_t i = 0; i < ch.order.size(); ++i) {
        PathType type = topo::rankPath(p, ch.order[i], ch.order[(i + 1) % ch.order.size()]).type;
        CHECK((type == PathType::NVL || type == PathType::NET));
      }
    CHECK(r.worstIntra == PathType::NVL);
  }
}

TEST_CASE("on the DGX-like box several channels take different orders and spread over the NICs") {
  topo::Topology t = testing::loadShipped("dgx_h100.xml");
  topo::Placement one = topo::replicate(t, 1, 0);
  RingPlan r = plan(one);
  REQUIRE(r.channels.size() > 1);
  std::set<std::vector<int>> orders;
  for (const RingChannel& ch : r.channels) orders.insert(ch.order);
  CHECK(orders.size() > 1);

  topo::Placement two = topo::replicate(t, 2, 0);
  RingPlan r2 = plan(two);
  REQUIRE(r2.channels.size() >= 8);
  std::set<int> entry, exit;
  for (const RingChannel& ch : r2.channels) {
    entry.insert(ch.entryNic[0]);
    exit.insert(ch.exitNic[0]);
    // The ring enters and leaves a host through a NIC next to the rank there.
    int first = -1, last = -1;
    for (int rank : ch.order)
      if (two.ranks[rank].host == 0) {
        if (first < 0) first = rank;
        last = rank;
      }
    const topo::HostModel& h = two.hosts[0];
    CHECK(h.paths.at(ch.entryNic[0], topo::rankNode(two, first)).type == PathType::PIX);
    CHECK(h.paths.at(topo::rankNode(two, last), ch.exitNic[0]).type == PathType::PIX);
  }
  CHECK(entry.size() == 8);
  CHECK(exit.size() == 8);
}

TEST_CASE("on the PCIe server a ring crosses the socket link only twice, however ranks are numbered") {
  topo::Topology t = testing::loadShipped("pcie_4gpu_2socket.xml");
  // A cycle through both sockets must cross between them an even number of
  // times, at least twice; blocked and interleaved numberings both reach two.
  for (std::vector<int> devs : {std::vector<int>{0, 1, 2, 3}, std::vector<int>{0, 2, 1, 3}, std::vector<int>{3, 0, 2, 1}}) {
    topo::Placement p = topo::replicate(t, 1, 0);
    for (int r = 0; r < 4; ++r) p.ranks[r].gpu = devs[r];
    RingPlan r = plan(p);
    requireValid(p, r);
    for (const RingChannel& ch : r.channels) CHECK(countEdges(p, ch.order, PathType::SYS) == 2);
  }
  // Across hosts each host is a path: it crosses its socket link once.
  topo::Placement p2 = topo::replicate(t, 2, 0);
  for (const RingChannel& ch : plan(p2).channels) CHECK(countEdges(p2, ch.order, PathType::SYS) == 2);
}

TEST_CASE("host-memory ranks spread over two sockets cross between them only twice") {
  topo::Topology t = testing::loadShipped("cpu_2socket.xml");
  for (int ranks : {4, 8, 12, 20}) {  // 12 and 20 exceed the exhaustive search and use the tree walk
    INFO(ranks << " ranks");
    topo::Placement p = topo::replicate(t, 1, ranks);
    // Interleave the sockets so that rank order alone would cross every time.
    for (int r = 0; r < ranks; ++r) p.ranks[r].cpu = r % 2;
    RingPlan r = plan(p);
    requireValid(p, r);
    for (const RingChannel& ch : r.channels) CHECK(countEdges(p, ch.order, PathType::SYS) == 2);
  }
}

TEST_CASE("channel limits are honoured and a bad range is an error") {
  topo::Placement p = topo::replicate(testing::loadShipped("dgx_h100.xml"), 1, 0);
  RingOptions o;
  o.minChannels = 3;
  o.maxChannels = 3;
  RingPlan r;
  REQUIRE(buildRings(p, o, &r) == ncclSuccess);
  CHECK(r.channels.size() == 3);
  o.minChannels = 4;
  o.maxChannels = 2;
  CHECK(buildRings(p, o, &r) == ncclInvalidArgument);
  p.ranks[0].gpu = 9;
  CHECK(buildRings(p, RingOptions(), &r) == ncclInvalidArgument);
  CHECK(std::string(lastErrorText()).find("GPU 9") != std::string::npos);
}

TEST_CASE("a single rank gets a trivial ring") {
  topo::Placement p = topo::replicate(testing::loadShipped("ci_vm.xml"), 1, 1);
  RingPlan r = plan(p);
  REQUIRE(r.channels.size() >= 1);
  CHECK(r.channels[0].order == std::vector<int>{0});
}
