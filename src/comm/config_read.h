// Reading a caller's ncclConfig_t. Programs built against older NCCL headers
// pass shorter structs: `size` says how many bytes are really there and
// `version` which NCCL release's layout they follow. Like NCCL, gyre reads a
// field only when that release had it (and the struct is long enough to hold
// it); every other field keeps NCCL_CONFIG_INITIALIZER's "undefined" value.
#pragma once

#include "include/gyre.h"

namespace gyre {

// Fills *out with the caller's settings (all "undefined" when config is NULL),
// or fails with ncclInvalidArgument naming `caller`, the field, its value and
// the versions involved: a wrong magic, a version older than ncclConfig_t, a
// size too small for the version, or a value NCCL would refuse.
ncclResult_t readConfig(const ncclConfig_t* config, const char* caller, ncclConfig_t* out);

}  // namespace gyre
