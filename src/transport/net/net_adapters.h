// Newer NCCL net plugin tables (ncclNet_v9 to ncclNet_v12) seen through the
// v8 table the net transport calls (net_v8.h). Members whose signature did
// not change are the plugin's own functions; the others are thin forwarders
// that widen sizes to size_t, pass no profiler handles, give an undefined
// traffic class (the plugin's default) and, from v11 on, pass the context
// init() returned to listen() and connect().
//
// A process loads at most one plugin, so each version's forwarders reach it
// through one pointer set here.
#pragma once

#include "src/transport/net/net_v10.h"
#include "src/transport/net/net_v11.h"
#include "src/transport/net/net_v8.h"
#include "src/transport/net/net_v9.h"

namespace gyre {

// The v8 view of `plugin`; valid for the life of the process.
const gyreNet_v8_t* adaptNetV9(const gyreNet_v9_t* plugin);
const gyreNet_v8_t* adaptNetV10(const gyreNet_v10_t* plugin);
const gyreNet_v8_t* adaptNetV11(const gyreNet_v11_t* plugin);
const gyreNet_v8_t* adaptNetV12(const gyreNet_v12_t* plugin);

// maxP2pBytes of device `dev` of the adapted plugin (v9 and later; 0 when
// the plugin states no limit or is v8).
size_t adaptedMaxP2pBytes(int dev);

}  // namespace gyre
