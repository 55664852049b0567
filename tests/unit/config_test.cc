#include <catch2/catch.hpp>

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/plan/algorithm.h"

using namespace gyre;

TEST_CASE("byte sizes accept plain numbers and K/M/G suffixes") {
  int64_t v = 0;
  CHECK(env::parseBytes("4194304", &v));
  CHECK(v == 4194304);
  CHECK(env::parseBytes("64K", &v));
  CHECK(v == 65536);
  CHECK(env::parseBytes("4m", &v));
  CHECK(v == 4 << 20);
  CHECK(env::parseBytes("1G", &v));
  CHECK(v == int64_t{1} << 30);
  CHECK_FALSE(env::parseBytes("", &v));
  CHECK_FALSE(env::parseBytes("12Q", &v));
  CHECK_FALSE(env::parseBytes("-5", &v));
  CHECK_FALSE(env::parseBytes("99999999999999999999G", &v));
}

TEST_CASE("a mistyped setting name is matched to the nearest declared one") {
  CHECK(env::nearestName("NCCL_BUFFLE_SIZE") == "NCCL_BUFFSIZE");
  CHECK(env::nearestName("NCCL_SOCKET_IFNAM") == "NCCL_SOCKET_IFNAME");
  CHECK(env::nearestName("GYRE_TIMEOT") == "GYRE_TIMEOUT");
  CHECK(env::nearestName("NCCL_COMPLETELY_DIFFERENT") == "");
}

TEST_CASE("every declared setting has a description, and its default is valid") {
  for (const env::VarSpec& v : env::registry()) {
    CHECK(std::string(v.description).size() > 0);
    if (v.type == env::Type::Int || v.type == env::Type::Bytes) {
      int64_t value = 0;
      CHECK(env::getInt(v.name, &value) == ncclSuccess);
    }
  }
}

TEST_CASE("NCCL_ALGO syntax: lists, ^ exclusion, case, and unknown names") {
  std::vector<std::string> allowed;
  std::vector<std::string> known = {"Ring", "Tree"};
  REQUIRE(parseSelection("NCCL_ALGO", "", known, &allowed) == ncclSuccess);
  CHECK(allowed == known);
  REQUIRE(parseSelection("NCCL_ALGO", "ring", known, &allowed) == ncclSuccess);
  CHECK(allowed == std::vector<std::string>{"Ring"});
  REQUIRE(parseSelection("NCCL_ALGO", "^Ring", known, &allowed) == ncclSuccess);
  CHECK(allowed == std::vector<std::string>{"Tree"});
  CHECK(parseSelection("NCCL_ALGO", "Bogus", known, &allowed) == ncclInvalidArgument);
  CHECK(std::string(lastErrorText()).find("Bogus") != std::string::npos);
  CHECK(parseSelection("NCCL_ALGO", "^Ring,Tree", known, &allowed) == ncclInvalidArgument);
}
