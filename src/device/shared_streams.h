// Ranks of one communicator that this process drives must not put captured
// work that waits for each other on one stream: a graph runs a stream's
// nodes in order, so the first rank's wait (a flag kernel, a point-to-point
// kernel) would hold back the other rank's work it waits for, forever.
#pragma once

#include <vector>

#include "include/gyre.h"
#include "src/device/device_comm.h"

namespace gyre {

// Fails, naming both ranks and the stream, when two of `calls` from
// different ranks of one communicator name the same stream. `path` says
// which captured path the calls take.
ncclResult_t refuseSharedStreams(const std::vector<const DeviceRequest*>& calls, const char* path);

}  // namespace gyre
