// Which network carries the connections between hosts (and between ranks of
// one host when shared memory is off): an external NCCL net plugin
// (NCCL_NET_PLUGIN), the built-in InfiniBand/RoCE verbs network, or the
// built-in Socket network. NCCL_NET names one; by default a plugin when one
// is loaded, else IB when a usable HCA port exists, else Socket.
//
// The Socket network's data path is the tuned TCP transport of
// src/transport/socket (helper threads, several sockets per connection); IB and
// plugins run under the generic net transport (net_transport.h) through the
// gyreNet_v8_t table.
#pragma once

#include <string>

#include "include/gyre.h"
#include "src/transport/net/net_v8.h"

namespace gyre {

class Transport;

struct Network {
  std::string name;                  // "IB", "Socket", or the plugin's own name
  const gyreNet_v8_t* api = nullptr;  // null for the built-in Socket network
  int devices = 1;
  bool external = false;             // loaded through NCCL_NET_PLUGIN
  size_t maxMessageBytes = 0;        // the plugin's maxP2pBytes (v9 and later); 0: no limit stated
};

// Chooses the network once per process from the settings (later calls return
// the same answer, or the same error naming the variable, its value and what
// exists).
ncclResult_t selectNetwork(const Network** out);

// The transport that carries network connections; selectNetwork() must have
// succeeded before.
Transport* networkTransport();

}  // namespace gyre
