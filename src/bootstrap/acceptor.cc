#include "src/bootstrap/acceptor.h"

#include <algorithm>
#include <cstring>

#include "src/bootstrap/secure/handshake.h"
#include "src/bootstrap/wire.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {
constexpr double kHelloSeconds = 2.0;
// A rank waiting for a peer to connect first gives it this long (it is
// usually busy with its own set-up), then checks every kProbeEverySeconds
// that the peer still listens.
constexpr double kFirstProbeSeconds = 1.0;
constexpr double kProbeEverySeconds = 0.5;
constexpr double kPeerRefusedGraceSeconds = 0.5;

// Introduces this rank on a connection to a peer's acceptor.
ncclResult_t sendHello(const Socket& s, uint64_t secret, int myRank, int tag, const Deadline& deadline,
                       const std::atomic<bool>* abort, const char* what) {
  ConnHello hello{};
  memcpy(hello.magic, kConnHelloMagic, sizeof(hello.magic));
  hello.secret = secret;
  hello.fromRank = myRank;
  hello.tag = tag;
  return s.sendAll(&hello, sizeof(hello), deadline, abort, what);
}
}  // namespace

ncclResult_t Acceptor::listen(const NetAddress& bindAddr) {
  NetAddress any = bindAddr;
  any.setPort(0);
  return Socket::listenOn(any, &listener_, &address_);
}

void Acceptor::close() {
  listener_.close();
  early_.clear();
  pending_.clear();
}

ncclResult_t Acceptor::acceptFrom(int fromRank, int tag, const Deadline& deadline,
                                  const std::atomic<bool>* abort, Socket* out) {
  if (link_.secret == 0) return fail(ncclInternalError, "acceptor: waiting for rank %d before the session secret is set",
                                fromRank);
  auto key = std::make_pair(fromRank, tag);
  char what[96];
  snprintf(what, sizeof(what), "waiting for rank %d to connect (tag %d)", fromRank, tag);
  Deadline probeAt = Deadline::afterSeconds(kFirstProbeSeconds);
  for (;;) {
    pending_.poll([this](Socket& s, const NetAddress& from, const ConnHello& hello, bool complete,
                         const std::string& refusal) {
      const bool isHello = complete && memcmp(hello.magic, kConnHelloMagic, sizeof(kConnHelloMagic)) == 0;
      if (isHello && hello.tag == kTagProbe) {
        // A liveness probe: it only woke this accept, and proves nothing.
      } else if (!refusal.empty()) {
        lastRefusal_ = "a connection from " + from.toString() +
                       (isHello ? " claiming rank " + std::to_string(hello.fromRank) : std::string()) +
                       " was refused: " + refusal;
        GYRE_WARN("%s", lastRefusal_.c_str());
      } else if (!isHello) {
        GYRE_WARN("dropped a connection from %s that is not a gyre peer", from.toString().c_str());
      } else if (hello.secret != link_.secret) {
        GYRE_WARN("refused a connection from %s claiming rank %d: wrong session secret (another "
                  "communicator, a stale one, or a caller that knows only the unique id)",
                  from.toString().c_str(), hello.fromRank);
      } else {
        early_[{hello.fromRank, hello.tag}] = std::move(s);
      }
    });
    auto it = early_.find(key);
    if (it != early_.end()) {
      *out = std::move(it->second);
      early_.erase(it);
      return ncclSuccess;
    }
    if (probeAt.expired() && !deadline.expired()) {
      GYRE_CHECK(probe(fromRank, deadline, abort, what));
      probeAt = Deadline::afterSeconds(kProbeEverySeconds);
    }
    // Wake for the next probe too; that wake-up is no failure.
    const bool untilProbe = peers_ && probeAt.remainingMs() < deadline.remainingMs();
    Socket s;
    NetAddress from;
    bool sliceEnded = false;
    ncclResult_t r;
    if (untilProbe) {
      TentativeFailures attempt;  // waking for the next probe is no failure
      r = acceptAround(listener_, !pending_.empty(), probeAt, abort, what, &s, &from, &sliceEnded);
      if (r != ncclSuccess && !(abort && abort->load())) continue;
      attempt.keep();
    } else {
      r = acceptAround(listener_, !pending_.empty(), deadline, abort, what, &s, &from, &sliceEnded);
    }
    // A peer refused at the handshake (another key, or not encrypting) is
    // likely the one that never came: say so with the timeout.
    if (r != ncclSuccess && deadline.expired() && !lastRefusal_.empty())
      return fail(r, "%s: timed out; %s", what, lastRefusal_.c_str());
    GYRE_CHECK(r);
    if (!sliceEnded) pending_.add(std::move(s), from, kHelloSeconds);
  }
}

ncclResult_t Acceptor::probe(int rank, const Deadline& deadline, const std::atomic<bool>* abort,
                             const char* what) const {
  if (!peers_ || rank < 0 || rank >= static_cast<int>(peers_->size())) return ncclSuccess;
  const PeerInfo& p = (*peers_)[rank];
  const NetAddress addr = NetAddress::fromWire(p.listen);
  Socket s;
  bool refused = false;
  const Deadline now = Deadline::afterSeconds(0);  // one attempt: it listened before
  ncclResult_t r;
  {
    TentativeFailures tentative;  // a refusal is reported below; a slow peer is the deadline's to judge
    Deadline attempt = Deadline::afterMs(std::min(200, deadline.remainingMs()));
    r = Socket::connectTo(addr, attempt, abort, &s, what, &now, &refused);
  }
  if (r != ncclSuccess && refused)
    return fail(ncclRemoteError,
                "%s: rank %d (%s pid %d) is gone: its listener at %s refuses connections, so it failed or exited "
                "during init", what, rank, p.host, p.pid, addr.toString().c_str());
  if (r != ncclSuccess) return ncclSuccess;  // slow or unreachable: the deadline decides
  TentativeFailures tentative;  // the probe only wakes the peer's accept; its fate does not matter
  // No secret in it: a probe may go in the clear where connections are encrypted.
  (void)sendHello(s, 0, myRank_, kTagProbe, Deadline::afterMs(100), abort, what);
  return ncclSuccess;
}

ncclResult_t connectToPeer(const NetAddress& peer, const LinkSecret& link, int myRank, int tag,
                           const Deadline& deadline, const std::atomic<bool>* abort, Socket* out,
                           const char* what) {
  // Every peer listened before it published its address, so a refusal that
  // lasts means its listener closed: the peer failed or exited. Say so now
  // instead of retrying until the init timeout (the grace covers nothing
  // real on Linux, where a full backlog drops SYNs rather than refusing).
  const Deadline refusedDeadline = Deadline::afterSeconds(kPeerRefusedGraceSeconds);
  bool refused = false;
  const ncclResult_t r = Socket::connectTo(peer, deadline, abort, out, what, &refusedDeadline, &refused);
  if (r != ncclSuccess) {
    if (!refused) return r;
    return fail(ncclRemoteError, "%s: rank at %s refused the connection after listening there: it failed or "
                "exited during init", what, peer.toString().c_str());
  }
  bool encrypt = false;
  GYRE_CHECK(chooseProtection(out->fd(), link, &encrypt, what));
  if (encrypt)
    GYRE_CHECK(secureConnect(*out, link, peer, deadline, abort, std::string(what) + " at " + peer.toString()));
  return sendHello(*out, link.secret, myRank, tag, deadline, abort, what);
}

}  // namespace gyre
