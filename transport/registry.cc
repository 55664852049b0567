#include "transport/shm/shm_transport.h"
#include "transport/socket/socket_transport.h"
#include "transport/transport.h"

namespace gyre {

std::vector<Transport*> registeredTransports() {
  return {
      shmTransport(),     // same host, unless NCCL_SHM_DISABLE=1
      socketTransport(),  // always possible; later transports go above it
  };
}

Transport* pickTransport(const PeerInfo& self, const PeerInfo& peer) {
  for (Transport* t : registeredTransports())
    if (t->canConnect(self, peer)) return t;
  return nullptr;
}

}  // namespace gyre
