// Which of a host's NICs the network transport may use. A NIC the settings
// rule out must not attract rings in the graph search or count towards the
// host's network bandwidth in the cost model:
//   NCCL_SOCKET_IFNAME  selects the kernel interfaces the socket transport uses
//                       (a NIC is usable through its netdev when it matches)
//   NCCL_IB_HCA         selects the verbs devices ("mlx5_0", "mlx5_0:1") of an
//                       InfiniBand transport
// The planner does not probe verbs devices (the IB network does, in
// src/transport/ib, applying NCCL_IB_HCA to the ports it uses), so here an IB
// port counts only through its IPoIB netdev unless a caller sets
// `haveIbTransport`.
#pragma once

#include <string>
#include <vector>

#include "src/topology/model.h"

namespace gyre::topo {

struct NetDeviceFilter {
  std::string socketIfname;  // NCCL_SOCKET_IFNAME syntax; empty: every interface
  std::string ibHca;         // NCCL_IB_HCA syntax; empty: every HCA
  bool haveIbTransport = false;
};

// The filter from the environment and config files.
NetDeviceFilter netDeviceFilterFromSettings();

// Removes the NICs (and their links) the filter rules out; returns their ids.
std::vector<std::string> dropUnusableNics(const NetDeviceFilter& f, Topology* t);

}  // namespace gyre::topo
