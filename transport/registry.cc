#include "transport/socket/socket_transport.h"
#include "transport/transport.h"

namespace gyre {

std::vector<Transport*> registeredTransports() {
  return {
      socketTransport(),  // always possible; later transports go above it
  };
}

Transport* pickTransport(const PeerInfo& self, const PeerInfo& peer) {
  for (Transport* t : registeredTransports())
    if (t->canConnect(self, peer)) return t;
  return nullptr;
}

}  // namespace gyre
