// NCCL_IB_HCA parsing and matching, port discovery on the fake provider
// (two devices, two ports, IB and RoCE; GID choice), and the registration
// cache (shared regions, counted deregistration, invalidation on free).
// Runs with GYRE_IBVERBS_LIB naming the fake provider (tests/net/meson.build).
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/transport/ib/hca_filter.h"
#include "src/transport/ib/ib_comm.h"
#include "src/transport/ib/ib_devices.h"
#include "src/transport/ib/reg_cache.h"

using namespace gyre;
using namespace gyre::ib;

namespace {

HcaFilter parsed(const std::string& spec) {
  HcaFilter f;
  REQUIRE(parseHcaFilter(spec, &f) == ncclSuccess);
  return f;
}

long fakeLiveMrs() {
  void* lib = dlopen(getenv("GYRE_IBVERBS_LIB"), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto counts = reinterpret_cast<void (*)(long*, long*, long*, long*, long*, long*)>(dlsym(lib, "fakeverbs_counts"));
  long mrs, qps, cqs, pds, regs, sends;
  counts(&mrs, &qps, &cqs, &pds, &regs, &sends);
  return mrs;
}

}  // namespace

TEST_CASE("NCCL_IB_HCA prefixes match every device they start, on every port", "[hca]") {
  HcaFilter f = parsed("mlx5");
  CHECK(hcaAllowed(f, "mlx5_0", 1));
  CHECK(hcaAllowed(f, "mlx5_12", 2));
  CHECK_FALSE(hcaAllowed(f, "bnxt_re0", 1));
  CHECK(hcaAllowed(parsed(""), "anything", 3));
}

TEST_CASE("NCCL_IB_HCA with = matches exact names and :port one port", "[hca]") {
  HcaFilter f = parsed("=mlx5_1:2,mlx5_3");
  CHECK(hcaAllowed(f, "mlx5_1", 2));
  CHECK_FALSE(hcaAllowed(f, "mlx5_1", 1));
  CHECK_FALSE(hcaAllowed(f, "mlx5_10", 2));
  CHECK(hcaAllowed(f, "mlx5_3", 1));
  CHECK_FALSE(hcaAllowed(f, "mlx5_30", 1));
}

TEST_CASE("NCCL_IB_HCA with ^ excludes what the list matches", "[hca]") {
  HcaFilter f = parsed("^mlx5_0,mlx5_1:1");
  CHECK_FALSE(hcaAllowed(f, "mlx5_0", 1));
  CHECK_FALSE(hcaAllowed(f, "mlx5_0", 2));
  CHECK_FALSE(hcaAllowed(f, "mlx5_1", 1));
  CHECK(hcaAllowed(f, "mlx5_1", 2));
  CHECK(hcaAllowed(f, "mlx5_2", 1));
  HcaFilter g = parsed("^=mlx5_1");
  CHECK_FALSE(hcaAllowed(g, "mlx5_1", 1));
  CHECK(hcaAllowed(g, "mlx5_10", 1));
}

TEST_CASE("malformed NCCL_IB_HCA is an error naming the variable and the value", "[hca]") {
  for (const char* bad : {"mlx5_0:x", "mlx5_0:", ",mlx5_0", "mlx5_0,,mlx5_1", "^", "=", "mlx5_0:0", ":1"}) {
    HcaFilter f;
    INFO(bad);
    REQUIRE(parseHcaFilter(bad, &f) == ncclInvalidArgument);
    const std::string e = lastErrorText();
    CHECK(e.find("NCCL_IB_HCA=") != std::string::npos);
    CHECK(e.find(bad) != std::string::npos);
  }
}

TEST_CASE("the fake provider's four ports are found, RoCE ports on the first RoCE v2 IPv4 GID", "[ports]") {
  const std::vector<IbPort>* ports = nullptr;
  std::string why;
  REQUIRE(ibPorts(&ports, &why) == ncclSuccess);
  INFO(why);
  REQUIRE(ports->size() == 4);
  CHECK((*ports)[0].label() == "fake_ib0:1");
  CHECK((*ports)[1].label() == "fake_ib0:2");
  CHECK((*ports)[0].linkLayer == IBV_LINK_LAYER_INFINIBAND);
  CHECK((*ports)[0].lid != 0);
  CHECK((*ports)[2].label() == "fake_roce0:1");
  CHECK((*ports)[2].linkLayer == IBV_LINK_LAYER_ETHERNET);
  CHECK((*ports)[2].gidIndex == 2);  // 0: RoCE v1, 1: RoCE v2 link-local, 2: RoCE v2 ::ffff:127.0.0.1
  CHECK((*ports)[2].gid.raw[10] == 0xff);
  CHECK((*ports)[2].gid.raw[12] == 127);
  CHECK((*ports)[0].speedMbps == 100000);  // 4 lanes of 25 Gb/s
}

TEST_CASE("the registration cache shares one region per buffer and deregisters it with its last user", "[regcache]") {
  const std::vector<IbPort>* ports = nullptr;
  std::string why;
  REQUIRE(ibPorts(&ports, &why) == ncclSuccess);
  REQUIRE(!ports->empty());
  ibv_pd* pd = (*ports)[0].pd;
  const long before = fakeLiveMrs();
  std::vector<char> buf(3 * 4096 + 100);
  IbMr *a = nullptr, *b = nullptr, *c = nullptr;
  REQUIRE(cachedRegister(pd, buf.data(), buf.size(), "fake_ib0", &a) == ncclSuccess);
  REQUIRE(cachedRegister(pd, buf.data() + 64, 1000, "fake_ib0", &b) == ncclSuccess);  // inside the first
  if (registrationCacheWatching()) {
    CHECK(a == b);
    CHECK(fakeLiveMrs() == before + 1);
  } else {  // no userfaultfd: regions are not shared, since nothing would say when one goes stale
    WARN("userfaultfd unavailable: the registration cache does not share regions");
    CHECK(a != b);
    CHECK(fakeLiveMrs() == before + 2);
  }
  REQUIRE(cachedDeregister(a) == ncclSuccess);
  CHECK(fakeLiveMrs() == before + 1);  // b still uses it
  REQUIRE(cachedDeregister(b) == ncclSuccess);
  CHECK(fakeLiveMrs() == before);
  CHECK(cachedRegionCount() == 0);
  // Freed memory (invalidated) is never found again, even at the same address.
  REQUIRE(cachedRegister(pd, buf.data(), buf.size(), "fake_ib0", &a) == ncclSuccess);
  invalidateRegistrations(buf.data(), buf.size());
  REQUIRE(cachedRegister(pd, buf.data(), buf.size(), "fake_ib0", &c) == ncclSuccess);
  CHECK(c != a);
  CHECK(fakeLiveMrs() == before + 2);
  REQUIRE(cachedDeregister(a) == ncclSuccess);
  REQUIRE(cachedDeregister(c) == ncclSuccess);
  CHECK(fakeLiveMrs() == before);
  CHECK(cachedRegionCount() == 0);
}
