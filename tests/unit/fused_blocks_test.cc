// planFusedBlocks: which block runs which lane when one launch carries
// several calls. Connections are stand-in addresses; what matters is which
// lanes share one.
#include <catch2/catch.hpp>

#include "src/device/kernel/fused_blocks.h"

namespace {

using gyre::FusedBlocks;
using gyre::LaneConnections;

// Stand-in connection identities.
const void* conn(int n) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(0x1000 + 16 * n)); }

// A ring call over `channels` channels: lane c uses channel c's send and receive.
LaneConnections ringCall(int channels) {
  LaneConnections lanes;
  for (int c = 0; c < channels; ++c) lanes.push_back({conn(2 * c), conn(2 * c + 1)});
  return lanes;
}

// Block b's lanes as "call.lane" strings.
std::vector<std::string> blockLanes(const FusedBlocks& f, int b) {
  std::vector<std::string> out;
  for (uint32_t k = f.blockFirst[b]; k < f.blockFirst[b + 1]; ++k)
    out.push_back(std::to_string(f.items[k].call) + "." + std::to_string(f.items[k].lane));
  return out;
}

}  // namespace

TEST_CASE("ring calls over the same channels share one block per channel, in call order", "[fused]") {
  FusedBlocks f;
  REQUIRE(gyre::planFusedBlocks({ringCall(3), ringCall(3), ringCall(3)}, 3, &f));
  REQUIRE(f.nblocks() == 3);
  for (int b = 0; b < 3; ++b) {
    std::string l = std::to_string(b);
    CHECK(blockLanes(f, b) == std::vector<std::string>{"0." + l, "1." + l, "2." + l});
  }
}

TEST_CASE("a call with fewer lanes joins the blocks of the channels it uses", "[fused]") {
  FusedBlocks f;
  REQUIRE(gyre::planFusedBlocks({ringCall(1), ringCall(4)}, 4, &f));
  REQUIRE(f.nblocks() == 4);
  CHECK(blockLanes(f, 0) == std::vector<std::string>{"0.0", "1.0"});
  CHECK(blockLanes(f, 3) == std::vector<std::string>{"1.3"});
}

TEST_CASE("lanes that share no connection run on blocks of their own", "[fused]") {
  LaneConnections tree = {{conn(100), conn(101)}, {conn(102), conn(103)}};  // up and down lanes
  FusedBlocks f;
  REQUIRE(gyre::planFusedBlocks({ringCall(2), tree}, 4, &f));
  REQUIRE(f.nblocks() == 4);
  CHECK(blockLanes(f, 2) == std::vector<std::string>{"1.0"});
  CHECK(blockLanes(f, 3) == std::vector<std::string>{"1.1"});
  SECTION("and are refused when that needs more blocks than allowed") {
    CHECK_FALSE(gyre::planFusedBlocks({ringCall(2), tree}, 3, &f));
  }
}

TEST_CASE("calls whose lanes would serialise two lanes of one call cannot share a launch", "[fused]") {
  // Call 1's only lane uses channel 0's send and channel 1's receive, tying
  // together lanes 0 and 1 of call 0, which must run side by side.
  LaneConnections bridge = {{conn(0), conn(3)}};
  FusedBlocks f;
  CHECK_FALSE(gyre::planFusedBlocks({ringCall(2), bridge}, 8, &f));
  CHECK_FALSE(gyre::planFusedBlocks({bridge, ringCall(2)}, 8, &f));
}

TEST_CASE("a lane without connections is a block of its own", "[fused]") {
  FusedBlocks f;
  REQUIRE(gyre::planFusedBlocks({LaneConnections{{}}, LaneConnections{{}}}, 2, &f));
  CHECK(f.nblocks() == 2);
}
