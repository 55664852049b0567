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
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#include "src/config/env.h"
#include "src/debug/log.h"
#include "src/transport/net/net_conn.h"

namespace gyre::net_detail {
namespace {

// Long enough for peers that abort too, a few polls apart, to complete each
// other's receives; short against GYRE_TIMEOUT.
constexpr double kAbortCloseSeconds = 2;

std::mutex gClosingMu;
std::vector<NetConn*> gClosing;

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
  std::lock_guard<std::mutex> lock(gClosingMu);
  gClosing.push_back(c);
}

bool finishClose(NetConn* c) {
  beginClose(c);
  bool done = false;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(gClosingMu);
      // Every closing connection of the process moves, so two ranks closing
      // in different orders still complete each other's messages.
      for (NetConn* other : gClosing)
        if (other != c) (void)closeStep(other);
      done = closeStep(c);
      if (done || c->closeDeadline.expired()) {
        gClosing.erase(std::remove(gClosing.begin(), gClosing.end(), c), gClosing.end());
        break;
      }
    }
    usleep(50);
  }
  if (!done) {
    int left = 0;
    for (int s = 0; s < kFifoSlots; ++s) left += (c->metaReq[s] != nullptr) + (c->dataReq[s] != nullptr);
    // On abort this is expected of a peer still inside a collective: INFO.
    if (c->abort && c->abort->load())
      GYRE_INFO("NET", "%s: %d network request(s) still in flight at abort (the peer did not close within %.0f s); "
                "closing the connection anyway",
                c->what.c_str(), left, kAbortCloseSeconds);
    else
      GYRE_WARN("%s: %d network request(s) still in flight after GYRE_TIMEOUT at close (the peer did not complete "
                "the close handshake); closing the connection anyway",
                c->what.c_str(), left);
  }
  return done;
}

}  // namespace gyre::net_detail
