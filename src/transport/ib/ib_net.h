// The built-in InfiniBand/RoCE network: libibverbs loaded with dlopen
// (GYRE_IBVERBS_LIB names another library, for tests), the HCA ports
// NCCL_IB_HCA allows, RC queue pairs with RDMA writes, behind the
// gyreNet_v8_t table.
#pragma once

#include <string>

#include "include/gyre.h"
#include "src/transport/net/network.h"

namespace gyre {

// Fills `out` when verbs load and at least one allowed port is active; else
// leaves out->api null and says why in *whyNot. Malformed settings
// (NCCL_IB_HCA naming nothing that exists, a bad GID index) are errors.
ncclResult_t probeIbNetwork(Network* out, std::string* whyNot);

}  // namespace gyre
