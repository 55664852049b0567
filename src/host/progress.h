// Drives the transports that need a helper to move bytes (sockets) and blocks
// in poll() on their descriptors when nothing can move. On host
// communicators the calling thread does this while it waits, so a collective
// costs no extra threads; a device proxy thread will call the same functions.
#pragma once

#include <poll.h>

#include <vector>

#include "include/gyre.h"
#include "transport/transport.h"

namespace gyre {

class ProgressEngine {
 public:
  void add(Connection* conn);
  void clear();
  bool empty() const { return conns_.empty(); }

  // One non-blocking pass over every connection. On failure *culprit names
  // the rank held responsible.
  ncclResult_t progressAll(int* culprit);

  // Adds the descriptors (and events) worth waiting on to *fds.
  void appendPollFds(std::vector<pollfd>* fds) const;

  void sendAbortNotices(int culprit);

 private:
  std::vector<Connection*> conns_;
};

}  // namespace gyre
