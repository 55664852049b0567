// Each rank's single listening socket. Peers connect for different purposes
// (bootstrap ring, transport channels) in any order; the acceptor checks each
// caller's session secret and hands out the connection that was asked for,
// keeping early arrivals for later. Callers without it are logged and dropped.
// Connections GYRE_ENCRYPT wants encrypted (secure/protection.h) do the
// encrypted handshake first, keyed by the session secret, which then never
// crosses the wire in the clear.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "src/bootstrap/pending_hellos.h"
#include "src/bootstrap/secure/handshake.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"

namespace gyre {

class Acceptor {
 public:
  // Listens before the secret is known: the address travels in the peer
  // table, whose reply brings the session secret (setLink).
  ncclResult_t listen(const NetAddress& bindAddr);
  void setLink(const LinkSecret& link) {
    link_ = link;
    pending_.setLink(&link_, listenerIdOf(link_, address_));
  }
  // The peer table (from the same rendezvous): every rank in it listened
  // before it joined, so while acceptFrom waits for a rank it probes that
  // rank's listener, and a refusal means the rank is gone.
  void setPeers(const std::vector<PeerInfo>* peers, int myRank) {
    peers_ = peers;
    myRank_ = myRank;
  }
  const NetAddress& address() const { return address_; }

  // Returns the connection from `fromRank` with `tag`, accepting until it comes.
  // Only after setLink: no caller is checked against an unset secret.
  ncclResult_t acceptFrom(int fromRank, int tag, const Deadline& deadline, const std::atomic<bool>* abort,
                          Socket* out);
  void close();

 private:
  // Fails naming `rank` if its listener refuses a connection.
  ncclResult_t probe(int rank, const Deadline& deadline, const std::atomic<bool>* abort, const char* what) const;

  Socket listener_;
  NetAddress address_;
  LinkSecret link_{0, true, LinkPurpose::Session};
  const std::vector<PeerInfo>* peers_ = nullptr;
  int myRank_ = -1;
  std::map<std::pair<int, int>, Socket> early_;
  PendingHellos<ConnHello> pending_;  // accepted, hello not read yet
  std::string lastRefusal_;           // the last caller refused, and why (for a timeout's message)
};

// Connects to a peer's acceptor and introduces this rank with `tag`. The
// peer listened before it joined the rendezvous, so a refusal that lasts
// half a second means it failed or exited: that fails at once rather than
// at the deadline.
// With encryption (chooseProtection) the handshake comes first and `what`
// names the peer in its errors.
ncclResult_t connectToPeer(const NetAddress& peer, const LinkSecret& link, int myRank, int tag,
                           const Deadline& deadline, const std::atomic<bool>* abort, Socket* out,
                           const char* what);

}  // namespace gyre
