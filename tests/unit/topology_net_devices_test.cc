// NCCL_SOCKET_IFNAME / NCCL_IB_HCA decide which NICs the plan may use.
#include "src/topology/net_devices.h"
#include "src/topology/paths.h"
#include "tests/unit/topology_fixtures.h"

using namespace gyre;
using namespace gyre::topo;

namespace {

std::vector<std::string> nicIds(const Topology& t) {
  std::vector<std::string> ids;
  for (int n : t.ofKind(NodeKind::Nic)) ids.push_back(t.nodes[n].id);
  return ids;
}

}  // namespace

TEST_CASE("no filter keeps every NIC that has a netdev") {
  Topology t = testing::loadShipped("dgx_h100.xml");
  size_t before = nicIds(t).size();
  CHECK(dropUnusableNics(NetDeviceFilter{}, &t).empty());
  CHECK(nicIds(t).size() == before);
}

TEST_CASE("NCCL_SOCKET_IFNAME keeps only matching netdevs and the topology stays valid") {
  Topology t = testing::loadShipped("dgx_h100.xml");
  NetDeviceFilter f;
  f.socketIfname = "ibp23";
  std::vector<std::string> dropped = dropUnusableNics(f, &t);
  CHECK(dropped.size() == 7);
  CHECK(nicIds(t) == std::vector<std::string>{"mlx5_0"});
  CHECK(validate(t, "filtered") == ncclSuccess);
  // Paths still compute over the re-indexed links.
  PathMatrix p = computePaths(t);
  int gpu0 = t.gpuByDevice(0), nic = t.find("mlx5_0");
  CHECK(p.at(gpu0, nic).valid);
}

TEST_CASE("an excluding NCCL_SOCKET_IFNAME drops the named interfaces") {
  Topology t = testing::loadShipped("dgx_h100.xml");
  NetDeviceFilter f;
  f.socketIfname = "^=ibp23s0";
  CHECK(dropUnusableNics(f, &t) == std::vector<std::string>{"mlx5_0"});
}

TEST_CASE("with an IB transport, NCCL_IB_HCA selects HCAs by name or name:port") {
  Topology t = testing::loadShipped("dgx_h100.xml");
  NetDeviceFilter f;
  f.socketIfname = "=none";
  f.ibHca = "=mlx5_1:1,mlx5_2";
  f.haveIbTransport = true;
  dropUnusableNics(f, &t);
  CHECK(nicIds(t) == std::vector<std::string>{"mlx5_1", "mlx5_2"});
}

TEST_CASE("without an IB transport NCCL_IB_HCA cannot bring back an IB port") {
  Topology t = testing::loadShipped("dgx_h100.xml");
  NetDeviceFilter f;
  f.socketIfname = "=none";
  f.ibHca = "mlx5";
  CHECK(dropUnusableNics(f, &t).size() == 8);
  CHECK(nicIds(t).empty());
}
