#include <set>
#include <tuple>

#include "tests/unit/topology_fixtures.h"

using namespace gyre;
using topo::Topology;

namespace {

// Parses `text` as a topology and returns the error text ("" on success).
std::string parseError(const std::string& text) {
  Topology t;
  ncclResult_t rc = topo::parseTopologyText(text, "test.xml", &t);
  return rc == ncclSuccess ? "" : std::string(lastErrorText());
}

const char* kMinimal = R"(<?xml version="1.0"?>
<!-- comment -->
<topology version="1" host="a&amp;b">
  <cpu id="cpu0" numa="0" cores="4">
    <pci id="sw0" bw="12">
      <gpu id="gpu0" dev="0" sm="80"/>
      <nic id="nic0" gbps="100" transport="eth"/>
    </pci>
  </cpu>
</topology>
)";

std::set<std::tuple<std::string, std::string, int, double>> linkSet(const Topology& t) {
  std::set<std::tuple<std::string, std::string, int, double>> s;
  for (const topo::Link& l : t.links) {
    std::string a = t.nodes[l.a].id, b = t.nodes[l.b].id;
    if (b < a) std::swap(a, b);
    s.emplace(a, b, static_cast<int>(l.type), l.bw);
  }
  return s;
}

}  // namespace

TEST_CASE("a minimal topology parses with nesting, entities and defaults") {
  Topology t;
  REQUIRE(topo::parseTopologyText(kMinimal, "mini.xml", &t) == ncclSuccess);
  CHECK(t.host == "a&b");
  REQUIRE(t.nodes.size() == 4);
  int gpu = t.find("gpu0"), nic = t.find("nic0"), sw = t.find("sw0");
  REQUIRE(gpu >= 0);
  CHECK(t.nodes[gpu].sm == 80);
  CHECK(t.nodes[nic].speed == Approx(12.5));  // 100 Gb/s is 12.5 GB/s
  // The switch's bw is its own uplink; the children, having none, get the Gen4 x16 default.
  for (const topo::Link& l : t.links) {
    if (l.b == sw) CHECK(l.bw == 12);
    if (l.b == gpu) CHECK(l.bw == Approx(topo::pciBw(4, 16)));
  }
}

TEST_CASE("malformed XML is rejected with the file name and the line") {
  CHECK(parseError("<topology>\n<cpu id=\"c\">\n</topology>").find("test.xml:3") != std::string::npos);
  CHECK(parseError("<topology>\n<cpu id=c/>\n</topology>").find("test.xml:2: attribute values must be quoted") !=
        std::string::npos);
  CHECK(parseError("<topology>\n\n<cpu id=\"c\" numa=\"0\" numa=\"1\"/></topology>").find("test.xml:3") !=
        std::string::npos);
  CHECK(parseError("<topology>\n  hello\n</topology>").find("unexpected text") != std::string::npos);
  CHECK(parseError("<topology>\n<cpu id=\"c\">").find("never closed") != std::string::npos);
  CHECK(parseError("").find("no root element") != std::string::npos);
  CHECK(parseError("<topology/><topology/>").find("after the root element") != std::string::npos);
  CHECK(parseError("<topology host=\"&bogus;\"/>").find("unknown entity") != std::string::npos);
  CHECK(parseError("<!-- open comment").find("never closed") != std::string::npos);
}

TEST_CASE("schema mistakes are rejected with the file name and the line") {
  CHECK(parseError("<topology>\n<cpu id=\"c\"/>\n<gpux id=\"g\"/>\n</topology>").find("test.xml:3: unknown element <gpux>") !=
        std::string::npos);
  CHECK(parseError("<topology>\n<cpu id=\"c\" numaa=\"1\"/>\n</topology>").find("test.xml:2: <cpu> has no attribute \"numaa\"") !=
        std::string::npos);
  CHECK(parseError("<topology>\n<cpu id=\"c\"/>\n<cpu id=\"c\"/>\n</topology>").find("already used on line 2") !=
        std::string::npos);
  CHECK(parseError("<topology><cpu id=\"c\"/>\n<link a=\"c\" b=\"x\" type=\"smp\" bw=\"1\"/></topology>")
            .find("test.xml:2: <link> names \"x\"") != std::string::npos);
  CHECK(parseError("<topology><cpu id=\"c\"><gpu id=\"g\" dev=\"0\" bw=\"fast\"/></cpu></topology>").find("not a positive number") !=
        std::string::npos);
  CHECK(parseError("<topology><cpu id=\"c\"><nic id=\"n\"/></cpu></topology>").find("needs a gbps attribute") !=
        std::string::npos);
  CHECK(parseError("<topology version=\"2\"><cpu id=\"c\"/></topology>").find("version \"2\" is not supported") !=
        std::string::npos);
  CHECK(parseError("<topology><pci id=\"p\"/></topology>").find("no cpu node") != std::string::npos);
  CHECK(parseError("<topology><cpu id=\"c\"/><gpu id=\"g\" dev=\"0\"/></topology>").find("not connected") !=
        std::string::npos);
  CHECK(parseError("<topology><cpu id=\"a\"/><cpu id=\"b\"/><link a=\"a\" b=\"b\" type=\"smp\"/></topology>")
            .find("needs bw") != std::string::npos);
}

TEST_CASE("a missing topology file is a system error naming the file") {
  Topology t;
  CHECK(topo::loadTopologyFile("/nonexistent/topo.xml", &t) == ncclSystemError);
  CHECK(std::string(lastErrorText()).find("/nonexistent/topo.xml") != std::string::npos);
}

TEST_CASE("every shipped topology survives a write and re-read unchanged") {
  for (const char* name : {"dgx_h100.xml", "pcie_4gpu_2socket.xml", "cpu_2socket.xml", "ci_vm.xml"}) {
    INFO(name);
    Topology t = testing::loadShipped(name);
    std::string text = topo::writeXml(topo::topologyToXml(t));
    Topology back;
    INFO(text);
    REQUIRE(topo::parseTopologyText(text, "roundtrip.xml", &back) == ncclSuccess);
    REQUIRE(back.nodes.size() == t.nodes.size());
    for (const topo::Node& n : t.nodes) {
      int i = back.find(n.id);
      REQUIRE(i >= 0);
      const topo::Node& m = back.nodes[i];
      CHECK(m.kind == n.kind);
      CHECK(m.index == n.index);
      CHECK(m.busId == n.busId);
      CHECK(m.name == n.name);
      CHECK(m.sm == n.sm);
      CHECK(m.speed == Approx(n.speed));
      CHECK(m.netdev == n.netdev);
      CHECK(m.cores == n.cores);
      CHECK(m.memBw == Approx(n.memBw));
    }
    CHECK(linkSet(back) == linkSet(t));
  }
}

TEST_CASE("NVLink bandwidth defaults to lanes times the lane rate of the GPU generation") {
  Topology t;
  REQUIRE(topo::parseTopologyText(R"(<topology><cpu id="c"><gpu id="g0" dev="0" sm="90"/><gpu id="g1" dev="1" sm="90"/></cpu>
      <link a="g0" b="g1" type="nvlink" count="4"/></topology>)", "nvl.xml", &t) == ncclSuccess);
  bool found = false;
  for (const topo::Link& l : t.links)
    if (l.type == topo::LinkType::NvLink) {
      found = true;
      CHECK(l.bw == Approx(4 * 20.6));  // NVLink4: about 20.6 GB/s per lane and direction
    }
  CHECK(found);
}
