// Which thread block runs which lane when one kernel launch carries several
// calls of a group (ncclGroupStart/End). A connection's steps must be taken
// in the same order at both ends: call order, as when every call is its own
// launch. So lanes of different calls that share a connection run one after
// the other on one block, and lanes that share nothing get blocks of their
// own and run in parallel — NCCL's per-channel work lists, found from the
// lanes' connections instead of assumed from channel numbers (a ring call
// and a tree call use different connections of the same channel).
#pragma once

#include <cstdint>
#include <vector>

#include "src/kernels/device_work.h"

namespace gyre {

// One call's lanes: for each lane, the connections it uses (any identity
// that is equal for the same connection, e.g. its Connection*).
using LaneConnections = std::vector<std::vector<const void*>>;

struct FusedBlocks {
  std::vector<uint32_t> blockFirst;  // nblocks + 1 offsets into items
  std::vector<LaneRef> items;        // each block's lanes, in call order
  int nblocks() const { return blockFirst.empty() ? 0 : static_cast<int>(blockFirst.size()) - 1; }
};

// The blocks for `calls` (in call order), or false when they cannot share
// one launch: two lanes of one call would have to run on one block (the
// lanes of a call may wait for each other, so they need blocks of their
// own), or the launch would need more than `maxBlocks` blocks (every block
// spins on its peers, so all of them must be resident on the GPU at once).
bool planFusedBlocks(const std::vector<LaneConnections>& calls, int maxBlocks, FusedBlocks* out);

}  // namespace gyre
