#include "transport/socket/socket_transport.h"
#include "transport/transport.h"

namespace gyre {

std::vector<Transport*> registeredTransports() {
  return {
      socketTransport(),  // always possible; later transports go above it
  };
}

}  // namespace gyre
