#include "src/device/kernel/fused_blocks.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>

namespace gyre {
namespace {

// Union-find over the lanes of all calls, numbered in (call, lane) order.
struct LaneSets {
  std::vector<int> parent;
  explicit LaneSets(int n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int root(int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  // The smaller number stays the root, so a set's root is its first lane.
  void join(int a, int b) {
    a = root(a);
    b = root(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

}  // namespace

bool planFusedBlocks(const std::vector<LaneConnections>& calls, int maxBlocks, FusedBlocks* out) {
  std::vector<LaneRef> lanes;
  for (size_t c = 0; c < calls.size(); ++c)
    for (size_t l = 0; l < calls[c].size(); ++l)
      lanes.push_back({static_cast<uint16_t>(c), static_cast<uint16_t>(l)});
  LaneSets sets(static_cast<int>(lanes.size()));
  std::unordered_map<const void*, int> firstUser;
  for (size_t n = 0; n < lanes.size(); ++n)
    for (const void* conn : calls[lanes[n].call][lanes[n].lane]) {
      auto [it, fresh] = firstUser.emplace(conn, static_cast<int>(n));
      if (!fresh) sets.join(it->second, static_cast<int>(n));
    }
  // Blocks in order of their first lane; a block's lanes in call order.
  std::vector<int> blockOfRoot(lanes.size(), -1);
  std::vector<std::vector<LaneRef>> blocks;
  for (size_t n = 0; n < lanes.size(); ++n) {
    int r = sets.root(static_cast<int>(n));
    if (blockOfRoot[r] < 0) {
      blockOfRoot[r] = static_cast<int>(blocks.size());
      blocks.emplace_back();
    }
    std::vector<LaneRef>& block = blocks[blockOfRoot[r]];
    if (!block.empty() && block.back().call == lanes[n].call) return false;  // two lanes of one call
    block.push_back(lanes[n]);
  }
  if (static_cast<int>(blocks.size()) > maxBlocks) return false;
  out->blockFirst.assign(1, 0);
  out->items.clear();
  for (const std::vector<LaneRef>& block : blocks) {
    out->items.insert(out->items.end(), block.begin(), block.end());
    out->blockFirst.push_back(static_cast<uint32_t>(out->items.size()));
  }
  return true;
}

}  // namespace gyre
