#include "tests/unit/topology_fixtures.h"
#include "src/topology/paths.h"

using namespace gyre;
using topo::PathType;

namespace {

struct Host {
  topo::Topology t;
  topo::PathMatrix p;
  const topo::Path& at(const char* a, const char* b) const {
    int x = t.find(a), y = t.find(b);
    REQUIRE(x >= 0);
    REQUIRE(y >= 0);
    return p.at(x, y);
  }
};

Host shipped(const char* name) {
  Host h{testing::loadShipped(name), {}};
  h.p = topo::computePaths(h.t);
  return h;
}

// Bandwidths from the hardware descriptions, not from the code under test.
const double kNvlinkLane = 20.6;              // NVLink4, GB/s per lane and direction
const double kGen5x16 = 3.94 * 16 * 0.75;     // effective PCIe Gen5 x16
const double kGen4x16 = 1.97 * 16 * 0.75;     // effective PCIe Gen4 x16

}  // namespace

TEST_CASE("on the DGX-like box every GPU pair is NVLink through all four switches") {
  Host h = shipped("dgx_h100.xml");
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      std::string ga = "gpu" + std::to_string(a), gb = "gpu" + std::to_string(b);
      const topo::Path& p = h.at(ga.c_str(), gb.c_str());
      if (a == b) {
        CHECK(p.type == PathType::LOC);
        continue;
      }
      CHECK(p.type == PathType::NVL);
      CHECK(p.bw == Approx(18 * kNvlinkLane));  // 5 + 4 + 4 + 5 lanes used in parallel
    }
}

TEST_CASE("on the DGX-like box a GPU reaches its own NIC through one switch and others through the CPUs") {
  Host h = shipped("dgx_h100.xml");
  CHECK(h.at("gpu0", "mlx5_0").type == PathType::PIX);
  CHECK(h.at("gpu0", "mlx5_0").bw == Approx(kGen5x16));
  CHECK(h.at("gpu0", "mlx5_3").type == PathType::PHB);  // same socket, other switch
  CHECK(h.at("gpu0", "mlx5_4").type == PathType::SYS);  // other socket
  CHECK(h.at("gpu0", "mlx5_4").bw == Approx(40));       // the socket link is the bottleneck
  CHECK(h.at("gpu5", "cpu1").type == PathType::PHB);
  CHECK(h.at("cpu0", "cpu1").type == PathType::SYS);
  CHECK(h.at("mlx5_1", "mlx5_2").type == PathType::PHB);
}

TEST_CASE("on the PCIe server GPUs pair up under a switch and cross the socket link otherwise") {
  Host h = shipped("pcie_4gpu_2socket.xml");
  CHECK(h.at("gpu0", "gpu1").type == PathType::PIX);
  CHECK(h.at("gpu0", "gpu1").bw == Approx(kGen4x16));
  CHECK(h.at("gpu2", "gpu3").type == PathType::PIX);
  for (const char* a : {"gpu0", "gpu1"})
    for (const char* b : {"gpu2", "gpu3"}) {
      CHECK(h.at(a, b).type == PathType::SYS);
      CHECK(h.at(a, b).bw == Approx(20));  // UPI as described, below the Gen4 links
    }
  CHECK(h.at("gpu1", "mlx5_0").type == PathType::PIX);
  CHECK(h.at("gpu1", "mlx5_1").type == PathType::SYS);
}

TEST_CASE("on the CPU-only host the NIC is near socket 0 and behind the socket link from socket 1") {
  Host h = shipped("cpu_2socket.xml");
  CHECK(h.at("cpu0", "cpu1").type == PathType::SYS);
  CHECK(h.at("cpu0", "cpu1").bw == Approx(16));
  CHECK(h.at("cpu0", "eth0").type == PathType::PHB);
  CHECK(h.at("cpu1", "eth0").type == PathType::SYS);
  CHECK(h.at("cpu0", "eth0").bw == Approx(0.985 * 8 * 0.75));  // Gen3 x8
}

TEST_CASE("paths are symmetric, LOC only on the diagonal, and routes carry the whole traffic") {
  for (const char* name : {"dgx_h100.xml", "pcie_4gpu_2socket.xml", "cpu_2socket.xml", "ci_vm.xml"}) {
    INFO(name);
    Host h = shipped(name);
    int n = static_cast<int>(h.t.nodes.size());
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b) {
        const topo::Path& x = h.p.at(a, b);
        const topo::Path& y = h.p.at(b, a);
        CHECK(x.valid == y.valid);
        if (!x.valid) continue;
        CHECK(x.type == y.type);
        CHECK(x.bw == Approx(y.bw));
        CHECK((x.type == PathType::LOC) == (a == b));
        // Every route leaves the source with all of its traffic.
        if (a != b) {
          double out = 0;
          for (const topo::RouteUse& u : x.route) {
            const topo::Link& l = h.t.links[u.resource / 2];
            int from = u.resource % 2 ? l.b : l.a;
            if (from == a) out += u.share;
          }
          CHECK(out == Approx(1.0));
        }
      }
  }
}

TEST_CASE("devices behind two levels of PCIe switches are PXB, and a host bridge makes PHB") {
  topo::Topology t;
  REQUIRE(topo::parseTopologyText(R"(<topology><cpu id="c">
      <pci id="top" bw="24"><pci id="leaf" bw="24"><gpu id="g0" dev="0"/></pci><gpu id="g1" dev="1"/></pci>
      <gpu id="g2" dev="2"/></cpu></topology>)", "pxb.xml", &t) == ncclSuccess);
  topo::PathMatrix p = topo::computePaths(t);
  CHECK(p.at(t.find("g0"), t.find("g1")).type == PathType::PXB);
  CHECK(p.at(t.find("g1"), t.find("g2")).type == PathType::PHB);
}

TEST_CASE("path level names parse case-insensitively") {
  PathType t;
  CHECK(topo::parsePathType("pxb", &t));
  CHECK(t == PathType::PXB);
  CHECK(topo::parsePathType("SYS", &t));
  CHECK(t == PathType::SYS);
  CHECK_FALSE(topo::parsePathType("NVLINK", &t));
}
