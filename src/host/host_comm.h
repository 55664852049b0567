// What the host executor knows of a communicator: plain values set once at
// init by the communicator (src/comm/executor_binding.cc), the progress
// engine over its connections, and the one thing only the communicator can
// do, put itself into the error state. The communicator owns one, opaque to
// it; lanes point at it.
#pragma once

#include <atomic>
#include <functional>
#include <vector>

#include "include/gyre.h"
#include "src/bootstrap/wire.h"
#include "src/host/outbox.h"
#include "src/host/peer_mappings.h"
#include "src/host/progress.h"

namespace gyre {

struct CommObserver;  // src/observe/observer.h

struct HostComm {
  int rank = 0;
  int nranks = 1;
  // Progress passes before a wait sleeps in poll(). A loopback message takes a
  // few microseconds, far less than a sleep/wake-up cycle, so spinning pays;
  // but with more ranks on this host than cores a spinning rank steals the
  // core its sender needs, so then it sleeps at once.
  int spinsBeforeBlocking = 200;
  double timeoutSeconds = 300;                   // GYRE_TIMEOUT
  const std::atomic<bool>* abortFlag = nullptr;  // the communicator's (ncclCommAbort)
  const std::vector<PeerInfo>* peers = nullptr;  // host and pid of each rank, for messages
  ProgressEngine progress;                       // every connection of the communicator
  PeerMappings peerMappings;                     // peers' shareable buffers mapped by single-copy steps
  Outboxes outboxes;                             // private pieces staged for several peers, per channel
  CommObserver* observer = nullptr;              // the communicator's, for its lanes' profiler events
  // Fails the communicator with `code`, telling its peers to blame `culprit`
  // (-1: nobody in particular), so every rank's error names the same rank.
  std::function<void(ncclResult_t code, int culprit)> markFailed;
};

}  // namespace gyre
