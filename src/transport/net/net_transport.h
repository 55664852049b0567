// A transport over any gyreNet_v8_t network (IB verbs, an external plugin).
//
// Each side keeps its FIFO in its own memory, registered with the network.
// A step crosses as two messages in order, its SlotMeta and then its
// payload: the receiver posts both receives for a slot only while that slot
// is free (posted - head < kFifoSlots), and a network's isend gives no
// request until the receiver has posted one, so a sender never overruns the
// receiver's slots.
//
// Set-up follows the ncclNet protocol: the receiver listen()s and passes its
// handle to the sender over a bootstrap socket; connect() and accept() are
// non-blocking and may need the peer to call them too, so every pending
// handshake of the process is driven while any one is awaited (a ring of
// ranks each waiting on its own would otherwise deadlock).
#pragma once

#include "src/transport/net/network.h"
#include "src/transport/transport.h"

namespace gyre {

// One transport per network (its name() is "NET/<name>").
Transport* netTransportFor(const Network* net);

}  // namespace gyre
