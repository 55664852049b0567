#include <catch2/catch.hpp>

#include "src/bootstrap/interfaces.h"

using namespace gyre;

TEST_CASE("NCCL_SOCKET_IFNAME prefixes match interface names by prefix") {
  InterfaceFilter f = parseInterfaceFilter("eth,ib");
  CHECK_FALSE(f.exclude);
  CHECK_FALSE(f.exact);
  CHECK(interfaceMatches(f, "eth0"));
  CHECK(interfaceMatches(f, "ib1"));
  CHECK_FALSE(interfaceMatches(f, "lo"));
  CHECK_FALSE(interfaceMatches(f, "enp0s3"));
}

TEST_CASE("a leading ^ excludes the listed prefixes") {
  InterfaceFilter f = parseInterfaceFilter("^docker,lo");
  CHECK(f.exclude);
  CHECK_FALSE(interfaceMatches(f, "docker0"));
  CHECK_FALSE(interfaceMatches(f, "lo"));
  CHECK(interfaceMatches(f, "eth0"));
}

TEST_CASE("a leading = demands exact names, also after ^") {
  InterfaceFilter f = parseInterfaceFilter("=eth0");
  CHECK(f.exact);
  CHECK(interfaceMatches(f, "eth0"));
  CHECK_FALSE(interfaceMatches(f, "eth01"));
  InterfaceFilter g = parseInterfaceFilter("^=eth0");
  CHECK(g.exclude);
  CHECK(g.exact);
  CHECK_FALSE(interfaceMatches(g, "eth0"));
  CHECK(interfaceMatches(g, "eth01"));
}

TEST_CASE("the loopback interface is found when NCCL_SOCKET_IFNAME=lo") {
  auto found = candidateInterfaces(parseInterfaceFilter("lo"), true, 0);
  REQUIRE_FALSE(found.empty());
  for (const Interface& itf : found) {
    CHECK(itf.name == "lo");
    CHECK(itf.address.isLoopback());
  }
  auto v4 = candidateInterfaces(parseInterfaceFilter("lo"), true, AF_INET);
  REQUIRE_FALSE(v4.empty());
  CHECK(v4.front().address.family() == AF_INET);
}

TEST_CASE("a filter that matches nothing yields no interface") {
  CHECK(candidateInterfaces(parseInterfaceFilter("=no-such-if"), true, 0).empty());
}
