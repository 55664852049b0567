#include <cstdlib>

#include "src/config/env.h"
#include "tests/unit/topology_fixtures.h"
#include "src/topology/placement.h"
#include "src/topology/transport_policy.h"

using namespace gyre;
using topo::EdgeTransport;

namespace {

EdgeTransport edge(const topo::Placement& p, int a, int b, const topo::TransportPolicy& pol) {
  bool gpus = p.ranks[a].gpu >= 0 && p.ranks[b].gpu >= 0;
  return topo::chooseEdgeTransport(topo::rankPath(p, a, b), gpus, pol);
}

}  // namespace

TEST_CASE("by default GPUs use P2P up to PXB, shared memory beyond, and the network across hosts") {
  topo::Placement p = topo::replicate(testing::loadShipped("pcie_4gpu_2socket.xml"), 2, 0);
  topo::TransportPolicy pol;
  CHECK(edge(p, 0, 1, pol) == EdgeTransport::P2P);  // PIX
  CHECK(edge(p, 1, 2, pol) == EdgeTransport::SHM);  // SYS
  CHECK(edge(p, 3, 4, pol) == EdgeTransport::NET);  // other host
  topo::Placement d = topo::replicate(testing::loadShipped("dgx_h100.xml"), 1, 0);
  CHECK(edge(d, 0, 7, pol) == EdgeTransport::P2P);  // NVL
}

TEST_CASE("P2P level, P2P and SHM switches change the choice") {
  topo::Placement p = topo::replicate(testing::loadShipped("pcie_4gpu_2socket.xml"), 1, 0);
  topo::TransportPolicy pol;
  pol.p2pLevel = topo::PathType::SYS;
  CHECK(edge(p, 1, 2, pol) == EdgeTransport::P2P);
  pol.p2pLevel = topo::PathType::NVL;
  CHECK(edge(p, 0, 1, pol) == EdgeTransport::SHM);
  pol.p2pLevel = topo::PathType::SYS;
  pol.p2pDisable = true;
  CHECK(edge(p, 0, 1, pol) == EdgeTransport::SHM);
  pol.shmDisable = true;
  CHECK(edge(p, 0, 1, pol) == EdgeTransport::NET);
}

TEST_CASE("host-memory ranks on one host share memory unless disabled") {
  topo::Placement p = topo::replicate(testing::loadShipped("cpu_2socket.xml"), 1, 4);
  topo::TransportPolicy pol;
  CHECK(edge(p, 0, 3, pol) == EdgeTransport::SHM);
  pol.shmDisable = true;
  CHECK(edge(p, 0, 3, pol) == EdgeTransport::NET);
}

TEST_CASE("GPUDirect RDMA follows NCCL_NET_GDR_LEVEL") {
  topo::Topology t = testing::loadShipped("dgx_h100.xml");
  topo::PathMatrix m = topo::computePaths(t);
  topo::TransportPolicy pol;
  CHECK(topo::gdrAllowed(m.at(t.find("gpu0"), t.find("mlx5_0")), pol));
  CHECK_FALSE(topo::gdrAllowed(m.at(t.find("gpu0"), t.find("mlx5_1")), pol));  // PHB
  pol.gdrLevel = topo::PathType::PHB;
  CHECK(topo::gdrAllowed(m.at(t.find("gpu0"), t.find("mlx5_1")), pol));
}

TEST_CASE("the policy is read from the settings, and a bad level is rejected") {
  setenv("NCCL_P2P_LEVEL", "nvl", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  env::reloadForTesting("/nonexistent/nccl.conf");
  topo::TransportPolicy pol;
  REQUIRE(topo::readTransportPolicy(&pol) == ncclSuccess);
  CHECK(pol.p2pLevel == topo::PathType::NVL);
  CHECK(pol.shmDisable);
  CHECK_FALSE(pol.p2pDisable);
  setenv("NCCL_NET_GDR_LEVEL", "NET", 1);
  env::reloadForTesting("/nonexistent/nccl.conf");
  CHECK(topo::readTransportPolicy(&pol) == ncclInvalidArgument);
  CHECK(std::string(lastErrorText()).find("NCCL_NET_GDR_LEVEL") != std::string::npos);
  for (const char* v : {"NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_NET_GDR_LEVEL"}) unsetenv(v);
  env::reloadForTesting();
}
