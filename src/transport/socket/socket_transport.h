// TCP transport. Each side keeps its own FIFO in local memory; progress()
// streams [SlotMeta][payload] messages from the sender's FIFO into the
// receiver's over a control socket, as far as the socket and free slots allow.
// With NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD > 1, large payloads go in
// pieces over that many more sockets, moved by helper threads
// (socket_data_path.h); both ranks must use the same counts.
#pragma once

#include "src/transport/transport.h"

namespace gyre {

Transport* socketTransport();

}  // namespace gyre
