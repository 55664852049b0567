// The first half of a rendezvous root's work: accepting the hellos of the
// ranks it serves (all of them with one root, its block with several) and, at
// root 0 of several, the blocks the other roots deliver. Checks that every
// caller agrees on nranks, the number of roots and root 0, and says who is
// missing when time runs out.
#pragma once

#include <string>
#include <vector>

#include "src/bootstrap/secure/protection.h"
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
  // The ids' secrets are random (ncclGetUniqueId), not derived from an
  // address (NCCL_COMM_ID): they can key encrypted connections.
  bool secretsRandom = true;
  std::vector<Joined> ranks;
  std::vector<RootBlock> roots;  // root 0 of several only
  std::string failure;           // empty while all is well
  std::string refused;           // the last caller refused at the handshake, and why
  bool complete() const;
};

// Accepts until every expected caller has come or `timeoutSeconds` after
// the first one (root 0 of several waits kRootExchangeGraceSeconds longer for
// the other roots, so that a root's own "rank K did not join" arrives first).
// Callers prove `secret`; those GYRE_ENCRYPT wants encrypted do the encrypted
// handshake first, keyed by it (g->secretsRandom says whether it can be).
void gatherAtRoot(const Socket& listener, uint64_t secret, double timeoutSeconds, RootGather* g);

// The checks gatherAtRoot makes of what callers send, apart from the socket
// work, so they can be tested on bytes. Each returns "" when all is well,
// else why not, naming the caller.
//
// Whether `hello` (which proved the id's secret) fits with the callers
// before it. The first caller fixes nranks, the number of roots and root 0
// (*first says that this one did).
std::string admitHello(RootGather* g, const RootHello& hello, bool* first);
// The status record that root hello.rootIndex sends before its block, and
// then the block's records (one per rank of that root, in rank order).
std::string blockStatusProblem(const RootHello& hello, RootReply* status, int nranks, int nRoots);
std::string blockRecordsProblem(const RootHello& hello, const std::vector<PeerInfo>& records, int nranks, int nRoots);
// Whether a rank's record is one for `rank` whose text fields are terminated.
std::string peerInfoProblem(const PeerInfo& info, int rank);
// Which ranks (and at root 0 which roots) have not come, for the failure
// the root sends when GYRE_INIT_TIMEOUT passes.
std::string describeMissing(const RootGather& g, double timeoutSeconds);

// How much longer than GYRE_INIT_TIMEOUT root 0 waits for the other roots.
constexpr double kRootExchangeGraceSeconds = 2.0;

// "3, 5, 7" (the first 16, then "...").
std::string listRanks(const std::vector<int>& ranks);

}  // namespace gyre
