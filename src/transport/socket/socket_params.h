// What the sending side of a socket connection tells the receiver right
// after its ConnHello (its step size and how many data sockets it cuts each
// payload across), and the receiver's check of it: the two sides must agree,
// and the record comes off the network, so every field is checked before
// it is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "include/gyre.h"

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

}  // namespace gyre::socket_detail
