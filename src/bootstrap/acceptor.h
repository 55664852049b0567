// Each rank's single listening socket. Peers connect for different purposes
// (bootstrap ring, transport channels) in any order; the acceptor checks each
// caller's session secret and hands out the connection that was asked for,
// keeping early arrivals for later. Callers without it are logged and dropped.
#pragma once

#include <atomic>
#include <map>
#include <utility>

#include "src/bootstrap/pending_hellos.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"

namespace gyre {

class Acceptor {
 public:
  // Listens before the secret is known: the address travels in the peer
  // table, whose reply brings the session secret (setSecret).
  ncclResult_t listen(const NetAddress& bindAddr);
  void setSecret(uint64_t secret) { secret_ = secret; }
  const NetAddress& address() const { return address_; }

  // Returns the connection from `fromRank` with `tag`, accepting until it comes.
  // Only after setSecret: no caller is checked against an unset secret.
  ncclResult_t acceptFrom(int fromRank, int tag, const Deadline& deadline, const std::atomic<bool>* abort,
                          Socket* out);
  void close();

 private:
  Socket listener_;
  NetAddress address_;
  uint64_t secret_ = 0;
  std::map<std::pair<int, int>, Socket> early_;
  PendingHellos<ConnHello> pending_;  // accepted, hello not read yet
};

// Connects to a peer's acceptor and introduces this rank with `tag`.
ncclResult_t connectToPeer(const NetAddress& peer, uint64_t secret, int myRank, int tag,
                           const Deadline& deadline, const std::atomic<bool>* abort, Socket* out,
                           const char* what);

}  // namespace gyre
