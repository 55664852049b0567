#include "src/transport/shm/shm_transport.h"
#include "src/transport/net/network.h"
#include "src/transport/transport.h"

namespace gyre {

std::vector<Transport*> registeredTransports() {
  return {
      shmTransport(),     // same host, unless NCCL_SHM_DISABLE=1
      networkTransport(),  // always possible: sockets at least (src/transport/net/network.h)
  };
}

Transport* pickTransport(const PeerInfo& self, const PeerInfo& peer) {
  for (Transport* t : registeredTransports())
    if (t->canConnect(self, peer)) return t;
  return nullptr;
}

}  // namespace gyre
