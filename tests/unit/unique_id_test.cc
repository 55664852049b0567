#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "src/bootstrap/unique_id.h"

using namespace gyre;

TEST_CASE("a unique id round-trips its root address, secret and mode") {
  for (const char* text : {"127.0.0.1:29500", "[::1]:4242", "10.1.2.3:1"}) {
    UniqueIdContents in;
    std::string why;
    REQUIRE(NetAddress::parse(text, &in.root, &why));
    in.secret = randomSecret();
    in.fixedAddress = text[0] == '1';
    ncclUniqueId id;
    encodeUniqueId(in, &id);
    UniqueIdContents out;
    REQUIRE(decodeUniqueId(id, &out) == ncclSuccess);
    CHECK(out.root.toString() == in.root.toString());
    CHECK(out.secret == in.secret);
    CHECK(out.fixedAddress == in.fixedAddress);
  }
}

TEST_CASE("a unique id of zeros or random bytes is rejected before any connection") {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  UniqueIdContents out;
  CHECK(decodeUniqueId(id, &out) == ncclInvalidArgument);
  srand(7);
  for (int trial = 0; trial < 100; ++trial) {
    for (char& c : id.internal) c = static_cast<char>(rand());
    CHECK(decodeUniqueId(id, &out) == ncclInvalidArgument);
  }
}

TEST_CASE("flipping any byte of a valid unique id is detected") {
  UniqueIdContents in;
  std::string why;
  REQUIRE(NetAddress::parse("192.168.0.7:5555", &in.root, &why));
  in.secret = 0x1234567890abcdefull;
  ncclUniqueId good;
  encodeUniqueId(in, &good);
  for (size_t i = 0; i < sizeof(good.internal); ++i) {
    ncclUniqueId bad = good;
    bad.internal[i] ^= 0x40;
    UniqueIdContents out;
    CHECK(decodeUniqueId(bad, &out) == ncclInvalidArgument);
  }
}

TEST_CASE("fresh secrets differ from each other") {
  CHECK(randomSecret() != randomSecret());
}

TEST_CASE("addresses parse host:port and [v6]:port, and reject bad ports") {
  NetAddress a;
  std::string why;
  CHECK(NetAddress::parse("127.0.0.1:80", &a, &why));
  CHECK(a.port() == 80);
  CHECK(a.isLoopback());
  CHECK(NetAddress::parse("[::1]:81", &a, &why));
  CHECK(a.family() == AF_INET6);
  CHECK(a.toString() == "[::1]:81");
  CHECK_FALSE(NetAddress::parse("127.0.0.1", &a, &why));
  CHECK_FALSE(NetAddress::parse("127.0.0.1:0", &a, &why));
  CHECK_FALSE(NetAddress::parse("127.0.0.1:70000", &a, &why));
  CHECK_FALSE(NetAddress::parse("[::1:5", &a, &why));
}
