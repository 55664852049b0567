// Connections a listener has accepted but that have not yet said who they
// are (their fixed-size hello). Read without waiting, so that one caller that
// connects and sends nothing — a port scan, a stuck or hostile client — holds
// up no one: the listener goes on accepting and reading the others, and drops
// the silent one when its time is up. Used by each rank's acceptor and by the
// rendezvous root. An encrypted caller's handshake (secure/handshake.h) is
// read the same way, so it holds up no one either.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "src/bootstrap/secure/handshake.h"
#include "src/bootstrap/secure/protection.h"
#include "src/bootstrap/socket.h"
#include "src/debug/error.h"

namespace gyre {

// How long one accept waits while callers are pending, so their hellos are
// read in between.
constexpr int64_t kPendingSliceMs = 20;

template <typename Hello>
class PendingHellos {
 public:
  // Callers whose connection is to be encrypted (chooseProtection with
  // `link`, which must outlive this) first do the encrypted handshake; their
  // hello then arrives sealed. `listenerId` is listenerIdOf(link, this
  // listener's address). Without a link every caller is clear.
  void setLink(const LinkSecret* link, std::string listenerId) {
    link_ = link;
    listenerId_ = std::move(listenerId);
  }

  void add(Socket socket, const NetAddress& from, double helloSeconds) {
    Item item{std::move(socket), from, Hello{}, 0, Deadline::afterSeconds(helloSeconds), false, SecureHello{}, 0,
              nullptr, {}};
    if (link_) {
      TentativeFailures attempt;  // a refusal is logged by the owner, naming the caller
      if (chooseProtection(item.socket.fd(), *link_, &item.secure, "listener") != ncclSuccess)
        item.refusal = threadErrorText();
    }
    items_.push_back(std::move(item));
  }
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }

  // Reads what each pending caller sent. For each whose hello is complete,
  // or who closed, ran out of time or was refused (complete = false), calls
  // done(Socket&, const NetAddress&, const Hello&, bool complete, const
  // std::string& refusal) and forgets it. `refusal` ("" if none) says why a
  // caller is refused even with a complete hello: a clear hello where
  // encryption is required (the owner may still accept a liveness probe,
  // which carries nothing secret), or a failed handshake.
  template <typename Done>
  void poll(Done&& done) {
    for (size_t i = 0; i < items_.size();) {
      Item& p = items_[i];
      bool finished = !p.refusal.empty();
      if (!finished && p.secure && !p.channel) finished = readSecureHello(p);
      if (!finished && (!p.secure || p.channel)) finished = readHello(p);
      if (!finished) {
        ++i;
        continue;
      }
      Item item = std::move(p);
      items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
      done(item.socket, item.from, item.hello, item.got == sizeof(Hello), item.refusal);
    }
  }

 private:
  struct Item {
    Socket socket;
    NetAddress from;
    Hello hello;
    size_t got;      // bytes of the hello read so far
    Deadline until;  // dropped if the hello is not complete by then
    bool secure;     // the encrypted handshake comes first
    SecureHello caller;
    size_t callerGot;
    std::unique_ptr<RecordChannel> channel;  // keyed for the caller's records once its hello is in
    std::string refusal;
  };

  // True when the caller is done with (refused or gone); false while it is
  // still sending its hello or once its records can be read.
  bool readSecureHello(Item& p) {
    size_t got = 0;
    ncclResult_t r;
    {
      TentativeFailures attempt;
      r = p.socket.tryRecv(reinterpret_cast<char*>(&p.caller) + p.callerGot, sizeof(SecureHello) - p.callerGot, &got,
                           "hello");
    }
    p.callerGot += got;
    if (p.callerGot >= sizeof(p.caller.magic) && memcmp(p.caller.magic, kSecureCallerMagic, sizeof(p.caller.magic))) {
      // A clear hello: read as one (a probe is still welcome), but refused.
      const size_t n = std::min(p.callerGot, sizeof(Hello));
      memcpy(&p.hello, &p.caller, n);
      p.got = n;
      p.secure = false;
      p.refusal = std::string("it sent a clear hello, but GYRE_ENCRYPT=") + encryptModeName(encryptMode()) +
                  " requires this connection to be encrypted (is GYRE_ENCRYPT=off set there, or is its gyre built "
                  "without OpenSSL?)";
      return p.got == sizeof(Hello) || readHello(p);
    }
    if (p.callerGot < sizeof(SecureHello)) return r != ncclSuccess || p.until.expired();
    std::string random(reinterpret_cast<const char*>(p.caller.random), sizeof(p.caller.random));
    uint32_t status = kSecureReplayed;
    if (!seen_.insert(random).second) {
      p.refusal = "its encrypted hello repeats an earlier connection's random bytes: a replay";
    } else {
      p.channel = secureListen(*link_, listenerId_, p.caller, &p.refusal, &status);
    }
    if (p.channel) return false;
    secureRefuse(p.socket, status);
    return true;
  }

  // Reads the hello (through the caller's channel when encrypted); true once done with the caller.
  bool readHello(Item& p) {
    size_t got = 0;
    ncclResult_t r = ncclSuccess;
    char* at = reinterpret_cast<char*>(&p.hello) + p.got;
    const size_t want = sizeof(Hello) - p.got;
    if (p.channel) {
      const iovec v{at, want};
      const ssize_t n = p.channel->recvv(p.socket.fd(), &v, 1);
      if (n > 0) got = static_cast<size_t>(n);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) r = ncclRemoteError;
      if (n < 0 && errno == EBADMSG) {
        p.refusal = p.channel->problem() + " (it holds another key, or its records were altered)";
        secureRefuse(p.socket, kSecureBadKey);
        return true;
      }
    } else {
      TentativeFailures attempt;  // a caller that closes early is done() with complete = false
      r = p.socket.tryRecv(at, want, &got, "hello");
    }
    p.got += got;
    if (!p.secure && p.refusal.empty() && p.got >= sizeof(kSecureCallerMagic) &&
        memcmp(&p.hello, kSecureCallerMagic, sizeof(kSecureCallerMagic)) == 0) {
      p.refusal = std::string("it asked for an encrypted connection, but GYRE_ENCRYPT=") +
                  encryptModeName(encryptMode()) + " here leaves this one clear";
      return true;
    }
    if (p.got == sizeof(Hello) && p.channel && !secureAccept(p.socket, *link_, p.caller, std::move(p.channel),
                                                             &p.refusal))
      return true;
    return p.got == sizeof(Hello) || r != ncclSuccess || p.until.expired();
  }

  const LinkSecret* link_ = nullptr;
  std::string listenerId_;
  std::set<std::string> seen_;  // callers' random bytes: a replayed hello is refused
  std::vector<Item> items_;
};

// Accepts one connection: while callers are pending, in a slice of
// kPendingSliceMs (*sliceEnded tells that it ended with nothing accepted, which
// is no failure); otherwise until `deadline`.
inline ncclResult_t acceptAround(const Socket& listener, bool pending, const Deadline& deadline,
                                 const std::atomic<bool>* abort, const char* what, Socket* out, NetAddress* from,
                                 bool* sliceEnded) {
  *sliceEnded = false;
  const bool slicing = pending && !deadline.expired();
  if (!slicing) return listener.acceptOne(out, from, deadline, abort, what);
  // A slice that ends with no caller is no failure: it must not reach the
  // log or another thread's ncclGetLastError.
  TentativeFailures attempt;
  const ncclResult_t r = listener.acceptOne(out, from, Deadline::afterMs(kPendingSliceMs), abort, what);
  if (r != ncclSuccess && !(abort && abort->load())) {
    *sliceEnded = true;
    return ncclSuccess;
  }
  attempt.keep();
  return r;
}

}  // namespace gyre
