// A receiver acknowledges steps by moving its FIFO's head; on shared memory
// that is a word in memory both ranks map, so a faulty or lying peer can
// store any value there. A head past the steps this rank has sent would
// acknowledge steps that never existed: the sender's free-slot test then
// sees no room (the difference wraps) and would wait until GYRE_TIMEOUT,
// blaming nobody for what it is. Checked on the stall path only.
#pragma once

#include <memory>
#include <vector>

#include "include/gyre.h"
#include "src/host/lane.h"

namespace gyre {

// Fails (naming the peer, both counts and the call) and marks the
// communicator failed if a peer acknowledged more steps than the lanes'
// send connections have posted; ncclSuccess otherwise.
ncclResult_t checkPeerCredits(const std::vector<std::unique_ptr<Lane>>& lanes);

}  // namespace gyre
