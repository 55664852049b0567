#include "src/bootstrap/root_gather.h"

#include <algorithm>
#include <cstring>

#include "src/bootstrap/pending_hellos.h"
#include "src/bootstrap/root_blocks.h"
#include "src/bootstrap/root_exchange.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

// A connection that does not send a full hello this fast is not a gyre rank.
constexpr double kHelloSeconds = 2.0;
// Like NCCL's root, wait long for the first rank (the id may travel slowly to
// the ranks); once one has joined the others get GYRE_INIT_TIMEOUT.
constexpr double kFirstArrivalSeconds = 3600.0;
// A root that proved root 0's secret sends its block right after its hello.
constexpr double kBlockSeconds = 10.0;

std::string str(int v) { return std::to_string(v); }

// The first caller fixes what the others must agree on.
void adopt(RootGather* g, const RootHello& h) {
  g->nranks = h.nranks;
  g->nRoots = h.nRoots;
  g->rootIndex = h.fromRoot ? 0 : h.rootIndex;
  g->firstRoot = h.firstRoot;
  g->firstRootSecret = h.firstRootSecret;
}

// Why a caller does not fit with those before it ("" if it does).
std::string disagreement(const RootGather& g, const RootHello& h) {
  const std::string who = h.fromRoot ? "root " + str(h.rootIndex) : "rank " + str(h.rank);
  if (h.nranks != g.nranks)
    return who + " called init with nranks=" + str(h.nranks) + " but another rank used nranks=" + str(g.nranks);
  if (h.nRoots != g.nRoots)
    return who + " was given " + str(h.nRoots) + " unique ids (nId) but another rank " + str(g.nRoots);
  if (h.nRoots < 1 || h.nRoots > h.nranks)
    return who + " has nId=" + str(h.nRoots) + " outside 1.." + str(h.nranks);
  if (h.fromRoot) {
    if (g.rootIndex != 0 || h.rootIndex < 1 || h.rootIndex >= g.nRoots)
      return "root " + str(h.rootIndex) + " delivered its ranks to root " + str(g.rootIndex) +
             ", which is not root 0: the ranks passed their unique ids in different orders";
    for (const RootBlock& b : g.roots)
      if (b.hello.rootIndex == h.rootIndex) return "two roots claim to be root " + str(h.rootIndex);
    return "";
  }
  if (h.rank < 0 || h.rank >= g.nranks)
    return "a rank joined with rank=" + str(h.rank) + " outside 0.." + str(g.nranks - 1);
  if (h.rootIndex != g.rootIndex)
    return "rank " + str(h.rank) + " reported to this root as commIds[" + str(h.rootIndex) +
           "] but an earlier caller as commIds[" + str(g.rootIndex) +
           "]: the ranks passed their unique ids in different orders";
  if (h.rootIndex != rootOfRank(h.rank, g.nranks, g.nRoots))
    return "rank " + str(h.rank) + " belongs to root " + str(rootOfRank(h.rank, g.nranks, g.nRoots)) +
           " but reported to root " + str(h.rootIndex);
  if (memcmp(&h.firstRoot, &g.firstRoot, sizeof(h.firstRoot)) != 0 || h.firstRootSecret != g.firstRootSecret)
    return "rank " + str(h.rank) + " has a different commIds[0] than an earlier rank of the same root";
  return "";
}

// Reads the block that a root's hello announced.
std::string readBlock(RootBlock* b, int nranks, int nRoots) {
  Deadline deadline = Deadline::afterSeconds(kBlockSeconds);
  RootReply status{};
  const std::string who = "root " + str(b->hello.rootIndex);
  if (b->socket.recvAll(&status, sizeof(status), deadline, nullptr, "rendezvous root 0: a root's block") !=
      ncclSuccess)
    return who + " connected to root 0 but sent no block";
  std::string why = blockStatusProblem(b->hello, &status, nranks, nRoots);
  if (!why.empty()) return why;
  b->records.resize(static_cast<size_t>(status.nranks));
  if (b->socket.recvAll(b->records.data(), b->records.size() * sizeof(PeerInfo), deadline, nullptr,
                        "rendezvous root 0: a root's block") != ncclSuccess)
    return who + " did not send all of its block";
  return blockRecordsProblem(b->hello, b->records, nranks, nRoots);
}

}  // namespace

bool RootGather::complete() const {
  if (nranks < 0) return false;
  const int size = nRoots > 1 ? blockSizeOfRoot(rootIndex, nranks, nRoots) : nranks;
  return static_cast<int>(ranks.size()) >= size && (rootIndex != 0 || static_cast<int>(roots.size()) >= nRoots - 1);
}

std::string listRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += ", ...";
  return out;
}

std::string peerInfoProblem(const PeerInfo& p, int rank) {
  if (p.rank != rank) return "its record names rank " + str(p.rank);
  if (!memchr(p.host, '\0', sizeof(p.host))) return "its record's host name is not terminated";
  return "";
}

std::string admitHello(RootGather* g, const RootHello& h, bool* first) {
  *first = g->nranks < 0;
  if (*first) adopt(g, h);
  std::string why = disagreement(*g, h);
  if (!why.empty() || h.fromRoot) return why;
  why = peerInfoProblem(h.info, h.rank);
  if (!why.empty()) return "rank " + str(h.rank) + " is malformed: " + why;
  for (const Joined& other : g->ranks)
    if (other.hello.rank == h.rank)
      return "two processes joined as rank " + str(h.rank) + " (" + other.hello.info.host + " pid " +
             str(other.hello.info.pid) + " and " + h.info.host + " pid " + str(h.info.pid) + ")";
  return "";
}

std::string blockStatusProblem(const RootHello& h, RootReply* status, int nranks, int nRoots) {
  const std::string who = "root " + str(h.rootIndex);
  status->message[sizeof(status->message) - 1] = '\0';
  if (status->status != kRootOk)
    return status->message[0] ? std::string(status->message) : who + " failed without saying why";
  const int size = blockSizeOfRoot(h.rootIndex, nranks, nRoots);
  if (status->nranks != size) return who + " delivered " + str(status->nranks) + " ranks, expected " + str(size);
  return "";
}

std::string blockRecordsProblem(const RootHello& h, const std::vector<PeerInfo>& records, int nranks, int nRoots) {
  const int first = firstRankOfRoot(h.rootIndex, nranks, nRoots);
  for (size_t i = 0; i < records.size(); ++i) {
    const std::string why = peerInfoProblem(records[i], first + static_cast<int>(i));
    if (!why.empty()) return "root " + str(h.rootIndex) + " sent a malformed block: " + why;
  }
  return "";
}

// At most this many missing ranks or roots are named: a hello that claims
// two billion ranks must not make the root walk or print them all.
constexpr size_t kMissingNamed = 16;

std::string describeMissing(const RootGather& g, double timeoutSeconds) {
  if (g.nranks < 0) return "no rank joined the rendezvous";
  const int first = g.nRoots > 1 ? firstRankOfRoot(g.rootIndex, g.nranks, g.nRoots) : 0;
  const int size = g.nRoots > 1 ? blockSizeOfRoot(g.rootIndex, g.nranks, g.nRoots) : g.nranks;
  std::vector<int> joined;
  for (const Joined& j : g.ranks) joined.push_back(j.hello.rank);
  std::sort(joined.begin(), joined.end());
  // One more than listRanks shows, so that it adds "...".
  std::vector<int> missing;
  for (int r = first; r < first + size && missing.size() <= kMissingNamed; ++r)
    if (!std::binary_search(joined.begin(), joined.end(), r)) missing.push_back(r);
  const std::string secs = str(static_cast<int>(timeoutSeconds));
  if (!missing.empty())
    return (missing.size() == 1 ? "rank " : "ranks ") + listRanks(missing) + " of " + str(g.nranks) +
           " did not join the communicator within " + secs + " s (GYRE_INIT_TIMEOUT)" +
           (g.nRoots > 1 ? " at root " + str(g.rootIndex) + " (commIds[" + str(g.rootIndex) + "])" : "");
  std::string out;
  size_t named = 0;
  for (int i = 1; i < g.nRoots; ++i) {
    bool present = false;
    for (const RootBlock& b : g.roots) present |= b.hello.rootIndex == i;
    if (present) continue;
    if (named++ == kMissingNamed) {
      out += "; ...";
      break;
    }
    const int f = firstRankOfRoot(i, g.nranks, g.nRoots);
    out += (out.empty() ? "" : "; ") + std::string("root ") + str(i) + " (commIds[" + str(i) + "], serving ranks " +
           str(f) + ".." + str(f + blockSizeOfRoot(i, g.nranks, g.nRoots) - 1) + ")";
  }
  return out + " did not deliver its ranks to root 0 within " + secs + " s (GYRE_INIT_TIMEOUT); is the "
         "process that made that unique id gone?";
}

void gatherAtRoot(const Socket& listener, uint64_t secret, double timeoutSeconds, RootGather* g) {
  Deadline deadline = Deadline::afterSeconds(kFirstArrivalSeconds);
  PendingHellos<RootHello> pending;
  const LinkSecret link{secret, g->secretsRandom, LinkPurpose::Rendezvous};
  pending.setLink(&link, listenerIdOf(link, NetAddress()));
  // Each caller's hello as it completes (or the caller fails to send one).
  auto onHello = [&](Socket& s, const NetAddress& from, const RootHello& hello, bool complete,
                     const std::string& refusal) {
    if (!g->failure.empty()) return;
    if (!refusal.empty()) {
      GYRE_WARN("rendezvous root: refused a connection from %s: %s", from.toString().c_str(), refusal.c_str());
      g->refused = "a connection from " + from.toString() + " was refused: " + refusal;
      // A clear caller can read why (nothing secret in it); an encrypted
      // one was already told by the handshake's answer.
      if (!s.encrypted() && complete && memcmp(hello.magic, kRootHelloMagic, sizeof(kRootHelloMagic)) == 0)
        sendReply(s, kRootFailed, "the rendezvous root refused rank " + std::to_string(hello.rank) + ": " + refusal,
                  Deadline::afterSeconds(kHelloSeconds));
      return;
    }
    if (!complete || memcmp(hello.magic, kRootHelloMagic, sizeof(kRootHelloMagic)) != 0) {
      GYRE_WARN("rendezvous root: ignored a connection from %s that is not a gyre rank", from.toString().c_str());
      return;
    }
    if (hello.secret != secret) {
      GYRE_WARN("rendezvous root: refused rank %d from %s: its unique id's secret does not match "
                "(stale or foreign unique id)", hello.rank, from.toString().c_str());
      sendReply(s, kRootRefused,
                "the rendezvous root refused rank " + std::to_string(hello.rank) + " (connecting from " +
                    from.toString() + "): the unique id's secret does not match (stale or wrong unique id)",
                Deadline::afterSeconds(kHelloSeconds));
      return;
    }
    bool first = false;
    g->failure = admitHello(g, hello, &first);
    if (first) {
      const bool waitsForRoots = g->nRoots > 1 && g->rootIndex == 0;
      deadline = Deadline::afterSeconds(timeoutSeconds + (waitsForRoots ? kRootExchangeGraceSeconds : 0.0));
    }
    if (hello.fromRoot) {
      RootBlock b;
      b.socket = std::move(s);
      b.hello = hello;
      if (g->failure.empty()) g->failure = readBlock(&b, g->nranks, g->nRoots);
      g->roots.push_back(std::move(b));
      return;
    }
    g->ranks.push_back({std::move(s), hello});
  };
  for (;;) {
    pending.poll(onHello);
    if (!g->failure.empty() || g->complete()) break;
    Socket s;
    NetAddress from;
    bool sliceEnded = false;
    if (acceptAround(listener, !pending.empty(), deadline, nullptr, "rendezvous root: accept", &s, &from,
                     &sliceEnded) != ncclSuccess)
      break;
    if (!sliceEnded) pending.add(std::move(s), from, kHelloSeconds);
  }
  if (g->failure.empty() && !g->complete()) {
    g->failure = describeMissing(*g, timeoutSeconds);
    if (!g->refused.empty()) g->failure += "; " + g->refused;
  }
}

}  // namespace gyre
