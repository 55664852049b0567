// Ranks that make different collectives, or the same one on different
// algorithms, may use disjoint connections (a tree and a ring): no step of
// one reaches the other's SlotMeta check, and both would wait until
// GYRE_TIMEOUT. A stalled rank therefore looks at the connections its call
// does not use: a step there stamped with one of its own calls' sequence
// numbers is a peer's data for "the same" call that this rank will never
// read, so the calls do not match.
#pragma once

#include <memory>
#include <vector>

#include "include/gyre.h"
#include "src/host/lane.h"

namespace gyre {

// Fails (naming the sender, both calls and the connection) and marks the
// communicator failed if such a step waits; ncclSuccess otherwise. Reads only
// counters and metadata: for the stall path, not for every pass.
ncclResult_t checkForeignSteps(const std::vector<std::unique_ptr<Lane>>& lanes);

}  // namespace gyre
