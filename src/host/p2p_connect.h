// Connections for ncclSend/ncclRecv are made the first time a pair talks,
// like NCCL's lazy p2p setup. Within one launch every rank first starts all
// its outgoing connections (a TCP connect completes without the peer
// accepting), then accepts the incoming ones, so pairs that connect to each
// other, or communicators driven by one thread, cannot wait on each other.
#pragma once

#include <vector>

#include "src/host/run_calls.h"

namespace gyre {

// The transports to each peer and the rendezvous come from the
// communicator's wiring (filled in at init).
ncclResult_t connectPeersFor(const std::vector<HostCall>& calls);

}  // namespace gyre
