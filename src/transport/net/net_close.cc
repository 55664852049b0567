// The final handshake of a net-transport connection. The receiver keeps
// receives posted for every free FIFO slot, so at close some are always in
// flight; a network that has posted them (a NIC's receive queue) may still
// write into them, and plugins refuse to close a comm with requests they
// still own. Networks cannot cancel a receive, so each one is completed:
// the receiver sends the number of messages it has receives posted for over
// the connection's control socket, the sender sends empty messages until
// its own count reaches it, and both test every request to its end before
// the comm is closed and the FIFO freed. A dead peer ends it early (its
// control socket closes, the network fails the requests), and GYRE_TIMEOUT
// bounds it. On ncclCommAbort a live peer may be stuck in a collective and
// never close: the wait is then bounded by kAbortCloseSeconds, so an abort
// still lets the peers learn of it (their connections break) in seconds.
//
// Destroy stays a local call, as in NCCL: a close waits in place only
// briefly (kInPlaceSeconds; peers that destroy together finish within it).
// A connection whose peer has not closed yet is then handed to a reaper
// thread that keeps its FIFO and comm, drives it, and releases them once
// its requests are done or its deadline passed; the thread ends when it
// has nothing left.
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "src/config/env.h"
#include "src/debug/log.h"
#include "src/transport/net/net_v8.h"
#include "src/transport/net/net_conn.h"

namespace gyre::net_detail {
namespace {

// Long enough for peers that abort too, a few polls apart, to complete each
// other's receives; short against GYRE_TIMEOUT.
constexpr double kAbortCloseSeconds = 2;

// How long a close waits in place for its peer before the reaper takes over.
constexpr double kInPlaceSeconds = 1;

// Never destroyed: the reaper may still run while the process exits.
struct Closing {
  std::mutex mu;
  std::vector<NetConn*> conns;  // closing, not yet released
  std::condition_variable reaperEnded;  // signalled when reaperRunning turns false
  bool reaperRunning = false;
  bool stopping = false;  // the process exits: the reaper leaves what is left
};

Closing& closing() {
  static Closing* state = new Closing();
  return *state;
}

double closeSeconds() {
  int64_t seconds = 300;
  if (env::getInt("GYRE_TIMEOUT", &seconds) != ncclSuccess || seconds <= 0) seconds = 300;
  return static_cast<double>(seconds);
}

// Tests every request `c` still holds; one the network fails has ended too.
void retireRequests(NetConn* c) {
  for (int s = 0; s < kFifoSlots; ++s)
    for (void** req : {&c->metaReq[s], &c->dataReq[s]}) {
      if (!*req) continue;
      int done = 0, size = 0;
      if (c->net->api->test(*req, &done, &size) != ncclSuccess) {
        c->networkFailed = true;  // the request ended with the connection
        *req = nullptr;
      } else if (done) {
        *req = nullptr;
      }
    }
}

bool requestsLeft(const NetConn* c) {
  for (int s = 0; s < kFifoSlots; ++s)
    if (c->metaReq[s] || c->dataReq[s]) return true;
  return false;
}

// Sender: reads the receiver's count, then sends empty messages up to it.
void sendClosingMessages(NetConn* c) {
  if (c->peerGone) return;
  while (c->peerMessagesBytes < sizeof(c->peerMessages)) {
    size_t n = 0;
    ncclResult_t r = c->control.tryRecv(reinterpret_cast<char*>(&c->peerMessages) + c->peerMessagesBytes,
                                        sizeof(c->peerMessages) - c->peerMessagesBytes, &n, c->what.c_str());
    if (r != ncclSuccess) {
      c->peerGone = true;
      return;
    }
    if (n == 0) return;
    c->peerMessagesBytes += n;
  }
  const gyreNet_v8_t* api = c->net->api;
  while (c->messagesPosted() < c->peerMessages) {
    const int s = static_cast<int>(c->posted % kFifoSlots);
    void** req = c->half ? &c->dataReq[s] : &c->metaReq[s];
    if (*req) return;  // the slot's earlier message is still in flight
    ncclResult_t r;
    if (!c->half) {
      c->meta[s] = SlotMeta{};
      r = api->isend(c->comm, &c->meta[s], sizeof(SlotMeta), 0, c->mhMeta, req);
    } else {
      r = api->isend(c->comm, c->slots + s * c->slotBytes, 0, 0, c->mhSlots, req);
    }
    if (r != ncclSuccess) {
      c->peerGone = true;  // the connection is down: nothing more will match
      return;
    }
    if (!*req) return;  // the receiver's buffer is not known to the network yet
    if (c->half) ++c->posted;
    c->half = !c->half;
  }
}

// One non-blocking pass over `c`; true once nothing of it is in flight.
bool closeStep(NetConn* c) {
  if (!c->comm) return true;
  retireRequests(c);
  if (c->isSend && !c->networkFailed) {
    sendClosingMessages(c);
    if (!c->peerGone && (c->peerMessagesBytes < sizeof(c->peerMessages) ||
                         c->messagesPosted() < c->peerMessages))
      return false;
  }
  return !requestsLeft(c);
}

}  // namespace

void beginClose(NetConn* c) {
  if (c->closing) return;
  c->closing = true;
  const bool aborting = c->abort && c->abort->load();
  c->closeDeadline = Deadline::afterSeconds(aborting ? std::min(kAbortCloseSeconds, closeSeconds()) : closeSeconds());
  // From beginClose, which every connection of a communicator passes at
  // once: the communicator's closes share one in-place wait.
  c->inPlaceDeadline = Deadline::afterSeconds(kInPlaceSeconds);
  // A connection the network already failed completes nothing more.
  if (!c->failure.empty() || c->noticeCulprit >= 0) c->networkFailed = true;
  if (c->comm && !c->isSend) {
    const uint64_t count = c->messagesPosted();
    // Eight bytes into an idle socket: only a closed peer makes this fail,
    // and then its requests fail too.
    if (c->control.valid() &&
        c->control.sendAll(&count, sizeof(count), Deadline::afterSeconds(1), nullptr, c->what.c_str()) != ncclSuccess)
      GYRE_INFO("NET", "%s: could not tell the peer how many receives are posted; closing without it",
                c->what.c_str());
  }
  std::lock_guard<std::mutex> lock(closing().mu);
  closing().conns.push_back(c);
}

namespace {

// Says why `c` is released with requests left (its deadline passed).
void reportLeftovers(const NetConn* c, bool aborting) {
  int left = 0;
  for (int s = 0; s < kFifoSlots; ++s) left += (c->metaReq[s] != nullptr) + (c->dataReq[s] != nullptr);
  // On abort this is expected of a peer still inside a collective: INFO.
  if (aborting)
    GYRE_INFO("NET", "%s: %d network request(s) still in flight at abort (the peer did not close within %.0f s); "
              "closing the connection anyway",
              c->what.c_str(), left, kAbortCloseSeconds);
  else
    GYRE_WARN("%s: %d network request(s) still in flight after GYRE_TIMEOUT at close (the peer did not complete "
              "the close handshake); closing the connection anyway",
              c->what.c_str(), left);
}

// Hands the network its comm back and frees the FIFO: nothing of it is in
// flight any more (or its deadline passed).
void release(NetConn* c) {
  const gyreNet_v8_t* api = c->net->api;
  if (c->comm) {
    if (c->mhSlots) (void)api->deregMr(c->comm, c->mhSlots);
    if (c->mhMeta) (void)api->deregMr(c->comm, c->mhMeta);
    (void)(c->isSend ? api->closeSend(c->comm) : api->closeRecv(c->comm));
  }
  if (c->listenComm) (void)api->closeListen(c->listenComm);
  free(c->slots);
  delete c;
}

// One pass over every closing connection but `except`; those done, or past
// their deadline, are released. Called with closing().mu held.
void driveOthers(const NetConn* except) {
  auto& conns = closing().conns;
  for (size_t i = 0; i < conns.size();) {
    NetConn* c = conns[i];
    if (c == except || !c->deferred) {
      if (c != except) (void)closeStep(c);
      ++i;
      continue;
    }
    const bool done = closeStep(c);
    if (!done && !c->closeDeadline.expired()) {
      ++i;
      continue;
    }
    if (!done) reportLeftovers(c, c->abortedAtClose);
    conns.erase(conns.begin() + static_cast<std::ptrdiff_t>(i));
    release(c);
  }
}

void reap() {
  Closing& s = closing();
  while (true) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      driveOthers(nullptr);
      bool deferredLeft = false;
      for (const NetConn* c : s.conns) deferredLeft = deferredLeft || c->deferred;
      if (!deferredLeft || s.stopping) {
        s.reaperRunning = false;
        s.reaperEnded.notify_all();
        return;
      }
    }
    usleep(1000);
  }
}

// At exit the reaper stops before the plugin's own statics are destroyed
// (they were made at dlopen, before this was registered).
void stopReaperAtExit() {
  Closing& s = closing();
  std::unique_lock<std::mutex> lock(s.mu);
  s.stopping = true;
  s.reaperEnded.wait(lock, [&s] { return !s.reaperRunning; });
}

// Called with closing().mu held.
void startReaper() {
  Closing& s = closing();
  if (s.reaperRunning || s.stopping) return;
  static std::once_flag atExit;
  std::call_once(atExit, [] { atexit(stopReaperAtExit); });
  // Detached: a reaper that finished its work must not stay an unjoined
  // thread until exit (a process that ends with _exit never joins it);
  // stopReaperAtExit waits for reaperRunning instead. Closing is never
  // destroyed, so the thread's last unlock cannot outlive it.
  s.reaperRunning = true;
  std::thread(reap).detach();
}

}  // namespace

void finishClose(NetConn* c) {
  beginClose(c);
  c->abortedAtClose = c->abort && c->abort->load();
  while (true) {
    {
      std::lock_guard<std::mutex> lock(closing().mu);
      // Every closing connection of the process moves, so two ranks closing
      // in different orders still complete each other's messages.
      driveOthers(c);
      auto& conns = closing().conns;
      const bool done = closeStep(c);
      if (done || c->closeDeadline.expired()) {
        conns.erase(std::remove(conns.begin(), conns.end(), c), conns.end());
        if (!done) reportLeftovers(c, c->abortedAtClose);
        break;
      }
      // An abort releases everything before it returns (its wait is short):
      // only a destroy leaves a connection to the reaper.
      if (!c->abortedAtClose && c->inPlaceDeadline.expired()) {
        // The communicator goes; the connection's memory stays with the
        // reaper until the peer's part arrives.
        c->abort = nullptr;
        c->deferred = true;
        startReaper();
        return;
      }
    }
    usleep(50);
  }
  release(c);
}

}  // namespace gyre::net_detail
