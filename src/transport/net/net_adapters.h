// Newer NCCL net plugin tables (ncclNet_v9, ncclNet_v10) seen through the
// v8 table the net transport calls (net_v8.h). Members whose signature did
// not change are the plugin's own functions; the others are thin forwarders
// that widen sizes to size_t, pass no profiler handles, and give connect()
// an undefined traffic class (the plugin's default).
//
// A process loads at most one plugin, so each version's forwarders reach it
// through one pointer set here.
#pragma once

#include "src/transport/net/net_v10.h"
#include "src/transport/net/net_v8.h"
#include "src/transport/net/net_v9.h"

namespace gyre {

// The v8 view of `plugin`; valid for the life of the process.
const gyreNet_v8_t* adaptNetV9(const gyreNet_v9_t* plugin);
const gyreNet_v8_t* adaptNetV10(const gyreNet_v10_t* plugin);

}  // namespace gyre
