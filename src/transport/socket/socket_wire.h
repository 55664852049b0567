// What a socket connection's receiver reads from its peer besides payload,
// and its checks of it: the sender's parameters record right after its
// ConnHello (its step size and how many data sockets it cuts each payload
// across), and each step's header (SlotMeta). Both come off the network,
// so every field is checked before it is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "include/gyre.h"
#include "src/transport/fifo.h"

namespace gyre::socket_detail {

struct SocketParams {
  uint64_t slotBytes;
  int32_t nthreads;  // NCCL_SOCKET_NTHREADS
  int32_t nsocks;    // NCCL_NSOCKS_PERTHREAD
};

struct SocketCounts {
  int nthreads = 1;
  int nsocks = 1;
  int total() const { return nthreads * nsocks; }
};

// This rank's NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD.
ncclResult_t readCounts(SocketCounts* out);

// Fails, naming `what` (the connection), `peer` and the field, when the
// sender's record does not match this rank's step size and socket counts.
ncclResult_t checkSocketParams(const SocketParams& theirs, size_t slotBytes, const SocketCounts& mine,
                               const std::string& what, int peer, int rank);

// The receiver's check of a step header that just arrived on the control
// socket: an abort notice sets *noticeCulprit (to a rank number, whatever
// the header says); a step larger than a slot is an error naming `peer`.
ncclResult_t checkIncomingHeader(const SlotMeta& m, size_t slotBytes, int peer, int nranks, const std::string& what,
                                 int* noticeCulprit);

}  // namespace gyre::socket_detail
