// Drives the transports that need a helper to move bytes (sockets) and blocks
// in poll() on their descriptors when nothing can move; for shared-memory
// connections it wakes peers after steps and sleeps on futexes. On host
// communicators the calling thread does this while it waits, so a collective
// costs no extra threads; a device proxy thread will call the same functions.
#pragma once

#include <poll.h>

#include <initializer_list>
#include <vector>

#include "include/gyre.h"
#include "src/transport/transport.h"

namespace gyre {

// Drives every connection of `lists` once, even after one fails: a failure on
// one connection (a peer's abort notice) must not starve the others of data
// the call still needs. Returns the first failure, with its culprit in
// *culprit and its text as the thread's last error.
ncclResult_t progressKeepingFirst(std::initializer_list<const std::vector<Connection*>*> lists, int* culprit,
                                  int* reporter = nullptr);

class ProgressEngine {
 public:
  void add(Connection* conn);
  void clear();
  bool empty() const { return conns_.empty() && shared_.empty() && quiet_.empty(); }

  // One non-blocking pass over every connection: moves socket bytes and wakes
  // shared-memory peers sleeping on a counter this rank has moved. On failure
  // *culprit names the rank held responsible (the first failure; the pass
  // still visits every connection).
  ncclResult_t progressAll(int* culprit, int* reporter = nullptr);  // reporter: the failing connection's peer

  // Wakes shared-memory peers only (after the executor's last steps).
  void wakePeers();

  // Before sleeping: whether the peers of connections that progressAll does
  // not visit (shared memory, p2p) are alive and have not sent an abort
  // notice. On failure *culprit names the rank held responsible.
  ncclResult_t checkQuietPeers(int* culprit, int* reporter = nullptr);

  // Adds the descriptors (and events) worth waiting on to *fds.
  void appendPollFds(std::vector<pollfd>* fds) const;

  void sendAbortNotices(int culprit);

  // The receiving connections whose FIFO this host can read (sockets and
  // shared memory, not p2p device memory).
  void appendReadableReceivers(std::vector<Connection*>* out) const;

  // Sleeps until one of `conns` (all sharedCounters) may have moved, or
  // timeoutMs passes. `draining` tells what a blocked send connection waits
  // for: every step consumed, instead of a free slot.
  static void sleepOnShared(const std::vector<Connection*>& conns, bool draining, int timeoutMs);

 private:
  std::vector<Connection*> conns_;   // needsProgress
  std::vector<Connection*> shared_;  // sharedCounters
  // Neither: FIFOs in device memory (p2p), which the host executor uses for
  // staged calls; only their side channel carries liveness and notices.
  std::vector<Connection*> quiet_;
};

}  // namespace gyre
