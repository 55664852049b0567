// Shared-memory transport for ranks on one host. Sender and receiver map the
// same segment (shm_segment.h), so the executors share one Fifo: the sender's
// steps land in the slots the receiver reduces from, with no copy and no
// helper moving bytes. The transport's work is set-up (shm_handshake.h),
// futex sleeps and wake-ups on the shared counters, abort notices through the
// shared header, and noticing a dead peer through the handshake socket.
#pragma once

#include "src/transport/transport.h"

namespace gyre {

Transport* shmTransport();

// Both ends of one connection inside this process, for tests: the segment is
// mapped twice, as by two processes, and a socketpair stands in for the
// handshake socket, so closing one end (shmTransport()->close) looks to the
// other like its peer dying.
ncclResult_t shmConnectLocalPair(size_t slotBytes, int senderRank, int receiverRank, Connection* send,
                                 Connection* recv);

}  // namespace gyre
