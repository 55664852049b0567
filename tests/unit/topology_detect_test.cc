#include <cstdio>
#include <cstdlib>

#include "src/config/env.h"
#include "tests/unit/topology_fixtures.h"
#include "src/topology/detect.h"
#include "src/topology/paths.h"

using namespace gyre;

TEST_CASE("detection on this machine gives a valid topology with a CPU and paths between all CPUs") {
  topo::Topology t;
  REQUIRE(topo::detectTopology(&t) == ncclSuccess);
  CHECK(topo::validate(t, "detected") == ncclSuccess);
  std::vector<int> cpus = t.ofKind(topo::NodeKind::Cpu);
  REQUIRE_FALSE(cpus.empty());
  topo::PathMatrix p = topo::computePaths(t);
  for (int a : cpus)
    for (int b : cpus) CHECK(p.at(a, b).valid);
  for (int n : t.ofKind(topo::NodeKind::Nic)) CHECK(t.nodes[n].speed > 0);
}

TEST_CASE("the detected topology survives a dump and a load") {
  topo::Topology t, back;
  REQUIRE(topo::detectTopology(&t) == ncclSuccess);
  char path[] = "/tmp/gyre_topo_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  REQUIRE(topo::dumpTopologyFile(t, path) == ncclSuccess);
  REQUIRE(topo::loadTopologyFile(path, &back) == ncclSuccess);
  CHECK(back.nodes.size() == t.nodes.size());
  CHECK(back.links.size() == t.links.size());
  unlink(path);
}

TEST_CASE("NCCL_TOPO_FILE replaces detection and NCCL_TOPO_DUMP_FILE receives the result") {
  std::string file = testing::topologiesDir() + "/pcie_4gpu_2socket.xml";
  char dump[] = "/tmp/gyre_dump_XXXXXX";
  int fd = mkstemp(dump);
  REQUIRE(fd >= 0);
  close(fd);
  setenv("NCCL_TOPO_FILE", file.c_str(), 1);
  setenv("NCCL_TOPO_DUMP_FILE", dump, 1);
  env::reloadForTesting("/nonexistent/nccl.conf");
  topo::Topology t;
  ncclResult_t rc = topo::hostTopology(&t);
  unsetenv("NCCL_TOPO_FILE");
  unsetenv("NCCL_TOPO_DUMP_FILE");
  env::reloadForTesting();
  REQUIRE(rc == ncclSuccess);
  CHECK(t.host == "pcie-4gpu");
  CHECK(t.ofKind(topo::NodeKind::Gpu).size() == 4);
  topo::Topology dumped;
  REQUIRE(topo::loadTopologyFile(dump, &dumped) == ncclSuccess);
  CHECK(dumped.nodes.size() == t.nodes.size());
  unlink(dump);
}

TEST_CASE("bus ids from CUDA and NVML are normalised to sysfs form") {
  CHECK(topo::detect::lowerBusId("00000000:1A:00.0") == "0000:1a:00.0");
  CHECK(topo::detect::lowerBusId("0000:1a:00.0") == "0000:1a:00.0");
  CHECK(topo::detect::lowerBusId("1a:00.0") == "0000:1a:00.0");
}
