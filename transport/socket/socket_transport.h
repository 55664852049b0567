// TCP transport: each connection is one socket. Each side keeps its own FIFO in
// local memory; progress() streams [SlotMeta][payload] messages from the
// sender's FIFO into the receiver's as far as the socket and free slots allow.
#pragma once

#include "transport/transport.h"

namespace gyre {

Transport* socketTransport();

}  // namespace gyre
