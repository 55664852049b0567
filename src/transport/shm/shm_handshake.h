// Handing a connection's segment (a memfd) from the sender to the receiver.
//
// Each rank taking part in a shared-memory connection listens on an
// abstract-namespace Unix socket named from the communicator's secret, its
// rank and a hash of its bootstrap address (so two communicators in one
// process never share a name, even when both come from one NCCL_COMM_ID).
// Abstract names have no file: they vanish with the socket, on any exit,
// SIGKILL included. A listener lives from the rank's first shared-memory
// connect call until its last shared-memory connection closes.
//
// Why the sender creates the segment: every rank makes all its send
// connections before its receive connections (transport.h), so a sender
// must not wait for anything its peer does in connectRecv, or two ranks
// sending to each other would deadlock. The sender creates the segment and
// connects to the receiver's listener, retrying until it exists (a rank
// creates its listener at its first shared-memory call, before it waits for
// anything, so this wait always ends), then sends a ShmHello with the memfd
// attached (SCM_RIGHTS) and returns. The receiver accepts in connectRecv and
// keeps hellos that arrive before their connectRecv call.
//
// The connected socket stays open for the connection's life as a liveness
// channel: nothing is written to it after the hello, so readable means EOF,
// and EOF means the peer process closed the connection or died.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "include/gyre.h"
#include "src/debug/deadline.h"

namespace gyre {

// Names one rank's listener.
struct ShmEndpoint {
  uint64_t secret = 0;
  int rank = -1;
  uint64_t addressHash = 0;  // of the rank's bootstrap listen address
};

struct ShmHello {
  char magic[8];
  uint64_t secret;
  int32_t fromRank;
  int32_t channel;
  uint64_t slotBytes;
};

// Starts listening as `self` (or counts one more user of the listener).
ncclResult_t shmAcquireListener(const ShmEndpoint& self);
// One user fewer; the last one closes the listener and any unclaimed hellos.
void shmReleaseListener(const ShmEndpoint& self);

// Sender: connects to `to`'s listener and sends the hello with `memfd`
// attached. *sock gets the connected socket (non-blocking).
ncclResult_t shmSendSegment(const ShmEndpoint& to, int fromRank, int channel, size_t slotBytes, int memfd,
                            const Deadline& deadline, const std::atomic<bool>* abort, int* sock, const char* what);

// Receiver: the connection from `fromRank` on `channel`, accepting until it
// arrives. *sock gets the socket (non-blocking), *memfd the segment.
ncclResult_t shmAcceptSegment(const ShmEndpoint& self, int fromRank, int channel, const Deadline& deadline,
                              const std::atomic<bool>* abort, ShmHello* hello, int* sock, int* memfd,
                              const char* what);

}  // namespace gyre
