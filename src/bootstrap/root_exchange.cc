#include "src/bootstrap/root_exchange.h"

#include <algorithm>
#include <cstring>

#include "src/bootstrap/root_blocks.h"
#include "src/bootstrap/secure/handshake.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

// Root 0 listened before its id existed: a refusal that lasts this long
// means it is gone (as for a rank's own root, rendezvous.cc).
constexpr double kFirstRootRefusedSeconds = 1.0;

// A reply of `status` carrying `message` (cut to the wire's field).
RootReply replyWith(int32_t status, const std::string& message) {
  RootReply reply{};
  reply.status = status;
  snprintf(reply.message, sizeof(reply.message), "%s", message.c_str());
  return reply;
}

// Sends the block (or the failure) and reads root 0's answer; "" or why not.
std::string handOver(const RootGather& g, const Socket& s, const Deadline& deadline, RootReply* reply,
                     std::vector<PeerInfo>* table) {
  const char* what = "rendezvous root: handing the block to root 0";
  RootHello hello{};
  memcpy(hello.magic, kRootHelloMagic, sizeof(hello.magic));
  hello.secret = g.firstRootSecret;
  hello.rank = firstRankOfRoot(g.rootIndex, g.nranks, g.nRoots);
  hello.nranks = g.nranks;
  hello.nRoots = g.nRoots;
  hello.rootIndex = g.rootIndex;
  hello.firstRoot = g.firstRoot;
  hello.firstRootSecret = g.firstRootSecret;
  hello.fromRoot = 1;
  RootReply status = replyWith(g.failure.empty() ? kRootOk : kRootFailed, g.failure);
  std::vector<PeerInfo> block;
  if (g.failure.empty()) {
    for (const Joined& j : g.ranks) block.push_back(j.hello.info);
    std::sort(block.begin(), block.end(), [](const PeerInfo& a, const PeerInfo& b) { return a.rank < b.rank; });
    status.nranks = static_cast<int32_t>(block.size());
  }
  if (s.sendAll(&hello, sizeof(hello), deadline, nullptr, what) != ncclSuccess ||
      s.sendAll(&status, sizeof(status), deadline, nullptr, what) != ncclSuccess ||
      s.sendAll(block.data(), block.size() * sizeof(PeerInfo), deadline, nullptr, what) != ncclSuccess)
    return "could not send its ranks to root 0";
  if (s.recvAll(reply, sizeof(*reply), deadline, nullptr, what) != ncclSuccess)
    return "root 0 (commIds[0]) did not answer";
  reply->message[sizeof(reply->message) - 1] = '\0';
  if (reply->status != kRootOk) return "";
  if (reply->nranks != g.nranks) return "root 0 answered for " + std::to_string(reply->nranks) + " ranks";
  table->resize(g.nranks);
  if (s.recvAll(table->data(), table->size() * sizeof(PeerInfo), deadline, nullptr, what) != ncclSuccess)
    return "root 0 (commIds[0]) did not send the whole peer table";
  return "";
}

}  // namespace

void sendReply(const Socket& s, int32_t status, const std::string& message, const Deadline& deadline) {
  const RootReply reply = replyWith(status, message);
  s.sendAll(&reply, sizeof(reply), deadline, nullptr, "rendezvous root: reply");
}

void sendTable(const Socket& s, const RootReply& reply, const std::vector<PeerInfo>& table,
               const Deadline& deadline) {
  if (s.sendAll(&reply, sizeof(reply), deadline, nullptr, "rendezvous root: reply") == ncclSuccess &&
      reply.status == kRootOk)
    s.sendAll(table.data(), table.size() * sizeof(PeerInfo), deadline, nullptr, "rendezvous root: peer table");
}

void exchangeWithFirstRoot(const RootGather& g, double timeoutSeconds, RootReply* reply,
                           std::vector<PeerInfo>* table) {
  const NetAddress first = NetAddress::fromWire(g.firstRoot);
  const std::string self = "root " + std::to_string(g.rootIndex) + " (commIds[" + std::to_string(g.rootIndex) + "])";
  // Root 0 may wait kRootExchangeGraceSeconds past GYRE_INIT_TIMEOUT for the
  // slowest root; its answer may take that long.
  Deadline deadline = Deadline::afterSeconds(timeoutSeconds + 2 * kRootExchangeGraceSeconds);
  Deadline refused = Deadline::afterSeconds(kFirstRootRefusedSeconds);
  bool wasRefused = false;
  Socket s;
  std::string why;
  if (Socket::connectTo(first, deadline, nullptr, &s, "rendezvous root: connecting to root 0", &refused,
                        &wasRefused) != ncclSuccess) {
    why = wasRefused ? "root 0 (commIds[0]) at " + first.toString() +
                           " refused the connection: the process that made commIds[0] exited or its id is stale"
                     : "root 0 (commIds[0]) at " + first.toString() + " could not be reached: " + lastErrorText();
  } else {
    const LinkSecret link{g.firstRootSecret, g.secretsRandom, LinkPurpose::Rendezvous};
    bool encrypt = false;
    if (chooseProtection(s.fd(), link, &encrypt, "rendezvous root: connecting to root 0") != ncclSuccess ||
        (encrypt && secureConnect(s, link, first, deadline, nullptr, "root 0 (commIds[0]) at " + first.toString()) !=
                        ncclSuccess))
      why = lastErrorText();
    else
      why = handOver(g, s, deadline, reply, table);
  }
  if (!why.empty()) {
    if (!g.failure.empty()) why = g.failure + "; and " + why;
    GYRE_WARN("rendezvous %s: %s", self.c_str(), why.c_str());
    *reply = replyWith(kRootFailed, self + ": " + why);
  }
}

}  // namespace gyre
