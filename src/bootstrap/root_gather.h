// The first half of a rendezvous root's work: accepting the hellos of the
// ranks it serves (all of them with one root, its block with several) and, at
// root 0 of several, the blocks the other roots deliver. Checks that every
// caller agrees on nranks, the number of roots and root 0, and says who is
// missing when time runs out.
#pragma once

#include <string>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/bootstrap/wire.h"

namespace gyre {

struct Joined {
  Socket socket;
  RootHello hello;
};

// What root hello.rootIndex delivered to root 0: its status (kRootOk, or a
// failure whose message says why) and its ranks' records.
struct RootBlock {
  Socket socket;
  RootHello hello;
  std::vector<PeerInfo> records;
};

struct RootGather {
  int nranks = -1;
  int nRoots = 1;
  int rootIndex = -1;  // which root this one is, once a caller said so
  WireAddress firstRoot{};
  uint64_t firstRootSecret = 0;
  std::vector<Joined> ranks;
  std::vector<RootBlock> roots;  // root 0 of several only
  std::string failure;           // empty while all is well
  bool complete() const;
};

// Accepts until every expected caller has come or `timeoutSeconds` after
// the first one (root 0 of several waits kRootExchangeGraceSeconds longer for
// the other roots, so that a root's own "rank K did not join" arrives first).
void gatherAtRoot(const Socket& listener, uint64_t secret, double timeoutSeconds, RootGather* g);

// How much longer than GYRE_INIT_TIMEOUT root 0 waits for the other roots.
constexpr double kRootExchangeGraceSeconds = 2.0;

// "3, 5, 7" (the first 16, then "...").
std::string listRanks(const std::vector<int>& ranks);

}  // namespace gyre
