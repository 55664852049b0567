// The host executor: turns lane specs into typed lanes and runs any set of
// lanes (one collective's channels, a group's sends and receives, even lanes
// of several communicators driven by one thread) to completion.
//
// Waiting: when no lane can move, the executor drives the transports'
// progress, spins briefly, yields, then sleeps (poll() on sockets, a futex on
// shared-memory counters). Every wait
// ends at GYRE_TIMEOUT without progress (the error names the peer, the
// collective, channel and step) or when a communicator is aborted.
#pragma once

#include <memory>
#include <vector>

#include "src/host/lane.h"

namespace gyre {

// Creates the lane for spec's datatype and operator, on `comm`.
ncclResult_t makeHostLane(const LaneSpec& spec, HostComm* comm, std::unique_ptr<Lane>* out);
// Rebinds *lane to spec when its type and operator fit, else makes a new one:
// repeated calls then allocate nothing.
ncclResult_t reuseHostLane(const LaneSpec& spec, HostComm* comm, std::unique_ptr<Lane>* lane);

// `lanesId`: nonzero names these lanes (the same connections, communicators
// and steps) for as long as they are rebound only by Lane::restart, so what
// the executor derives from them once is kept across calls; 0: derive anew.
ncclResult_t runLanes(std::vector<std::unique_ptr<Lane>>& lanes, uint64_t lanesId = 0);

}  // namespace gyre
