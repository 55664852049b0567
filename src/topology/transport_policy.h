// Which kind of transport an edge between two ranks may use, from the path
// between them and the settings that restrict it (NCCL's semantics):
//   NCCL_P2P_LEVEL      farthest path over which GPUs talk peer-to-peer (default PXB)
//   NCCL_P2P_DISABLE=1  never peer-to-peer
//   NCCL_SHM_DISABLE=1  never shared memory (then the network/socket transport)
//   NCCL_NET_GDR_LEVEL  farthest GPU-NIC path over which the NIC reads GPU
//                       memory directly (GPUDirect RDMA; default PXB)
// The transport layer applies this when it connects ring and tree edges.
#pragma once

#include "include/gyre.h"
#include "src/topology/paths.h"

namespace gyre::topo {

struct TransportPolicy {
  PathType p2pLevel = PathType::PXB;
  bool p2pDisable = false;
  bool shmDisable = false;
  PathType gdrLevel = PathType::PXB;
};

// The policy the environment and config files ask for (validated).
ncclResult_t readTransportPolicy(TransportPolicy* out);

enum class EdgeTransport { P2P, SHM, NET };
const char* edgeTransportName(EdgeTransport t);  // "p2p", "shm", "net"

// `path` is rankPath() between the two ranks; `bothGpus` when both use device
// memory. Ranks on different hosts always use the network.
EdgeTransport chooseEdgeTransport(const Path& path, bool bothGpus, const TransportPolicy& policy);

// Whether a NIC may read and write a GPU's memory directly over this path.
bool gdrAllowed(const Path& gpuToNic, const TransportPolicy& policy);

}  // namespace gyre::topo
