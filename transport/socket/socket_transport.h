// TCP transport. Each side keeps its own FIFO in local memory; progress()
// streams [SlotMeta][payload] messages from the sender's FIFO into the
// receiver's over a control socket, as far as the socket and free slots allow.
// Payloads of kSplitBytes or more leave the message and go in pieces over
// NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD data sockets (1 x 1 by
// default), moved by helper threads (socket_data_path.h), so the kernel's
// copies overlap the executor's work; both ranks must use the same counts.
#pragma once

#include "transport/transport.h"

namespace gyre {

Transport* socketTransport();

}  // namespace gyre
