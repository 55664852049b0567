// What the host executor knows of a communicator: plain values set once at
// init by the communicator (src/comm/executor_binding.cc), the progress
// engine over its connections, what lowering reads (the wiring), and the
// communicator's error state, which a failing lane sets. The communicator
// owns one, opaque to it; lanes point at it.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/bootstrap/wire.h"
#include "src/host/outbox.h"
#include "src/host/peer_mappings.h"
#include "src/host/progress.h"
#include "src/lower/wiring.h"

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
  Wiring* wiring = nullptr;          // the communicator's connections: what calls are lowered over
  CommObserver* observer = nullptr;  // the communicator's counters and profiler events
  uint64_t* opCount = nullptr;       // the communicator's collective sequence number
  uint64_t serial = 0;               // the communicator's, never reused (repeat_call.h)
  // The communicator's error state (ncclCommGetAsyncError and its text).
  std::atomic<int>* asyncError = nullptr;
  std::mutex* errorMutex = nullptr;
  std::string* errorText = nullptr;  // guarded by *errorMutex

  // Fails the communicator with `code` (the first failure wins; its text is
  // the thread's last error), telling its peers to blame `culprit` (-1:
  // nobody in particular), so every rank's error names the same rank.
  void markFailed(ncclResult_t code, int culprit);
  // Makes ncclCommGetAsyncError report `code` and `why`, unless the
  // communicator already holds an error; tells no peer.
  void noteAsyncError(ncclResult_t code, const std::string& why);
  // Fails (naming the communicator's error) when the communicator was
  // aborted or failed earlier: a call then must not wait for its peers.
  ncclResult_t checkRunnable(const char* what) const;
};

}  // namespace gyre
