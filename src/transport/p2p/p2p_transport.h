// Peer-to-peer transport for the device executor: a connection's FIFO
// (slots, SlotMeta, tail and head; src/transport/fifo.h) lives in the receiving
// rank's device memory and the sender maps it — with CUDA IPC from another
// process, or the plain pointer when both ranks are in one process (CUDA
// refuses to open a process's own handle). Kernels on both sides then move
// data and counters with ordinary loads and stores: over NVLink or PCIe
// between GPUs with peer access, and through the GPU's own memory when
// several ranks share one GPU (which NCCL refuses).
//
// The receiver owns the memory, so a sender that finishes and leaves first
// never pulls the buffer out from under a receiver still reading it.
//
// Set-up respects the connect-all-sends-first rule (transport.h): the sender
// only introduces itself in connectSend; the receiver allocates and answers
// in connectRecv; the sender reads the answer in finishConnect, after every
// rank has run its connectRecv calls.
//
// Chosen by transportForPeer (src/comm/comm_topology.cc) for the edges of a
// device communicator that runs the collective kernel; the host executor never
// drives these connections.
#pragma once

#include "src/transport/transport.h"

namespace gyre {

Transport* p2pTransport();

}  // namespace gyre
