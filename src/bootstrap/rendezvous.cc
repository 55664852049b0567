#include "src/bootstrap/rendezvous.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/root_answer.h"
#include "src/bootstrap/root_blocks.h"
#include "src/bootstrap/root_exchange.h"
#include "src/bootstrap/root_gather.h"
#include "src/bootstrap/secure/handshake.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/fork_guard.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

// Listener fds of roots owned by this process. A forked child has no root
// thread, so it closes its copies: otherwise a dead root's port would stay open
// in every child and stale ids would hang instead of being refused.
// Never destroyed: a detached root thread may still untrack its fd while
// the process runs its static destructors.
struct RootFds {
  std::mutex mutex;
  std::set<int> fds;
};
RootFds& rootFds() {
  static RootFds* r = new RootFds;
  return *r;
}
void closeRootFdsInChild() {
  for (int fd : rootFds().fds) close(fd);
  rootFds().fds.clear();
}
void trackRootFd(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, closeRootFdsInChild); });
  std::lock_guard<std::mutex> lock(rootFds().mutex);
  rootFds().fds.insert(fd);
}
void untrackRootFd(int fd) {
  std::lock_guard<std::mutex> lock(rootFds().mutex);
  rootFds().fds.erase(fd);
}

double initTimeoutSeconds() {
  int64_t t = 120;
  if (env::getInt("GYRE_INIT_TIMEOUT", &t) != ncclSuccess) t = 120;
  return static_cast<double>(t);
}

}  // namespace

void serveRendezvous(Socket listener, uint64_t secret, double timeoutSeconds, bool secretRandom) {
  RootGather g;
  g.secretsRandom = secretRandom;
  gatherAtRoot(listener, secret, timeoutSeconds, &g);
  // A rank of this process that has its answer may return and exit before
  // this (detached) thread reaches the next rank: answer it last.
  std::stable_partition(g.ranks.begin(), g.ranks.end(),
                        [](const Joined& j) { return j.hello.info.pid != static_cast<int32_t>(getpid()); });
  Deadline replyDeadline = Deadline::afterSeconds(10);
  if (g.nRoots > 1 && g.rootIndex > 0) {
    // Root i > 0: its block (or why it failed) goes to root 0, whose answer
    // goes to this root's ranks.
    RootReply reply{};
    std::vector<PeerInfo> table;
    exchangeWithFirstRoot(g, timeoutSeconds, &reply, &table);
    for (const Joined& j : g.ranks) sendTable(j.socket, reply, table, replyDeadline);
  } else if (!g.failure.empty()) {
    GYRE_WARN("rendezvous root: %s", g.failure.c_str());
    for (const Joined& j : g.ranks) sendReply(j.socket, kRootFailed, g.failure, replyDeadline);
    for (const RootBlock& b : g.roots) sendReply(b.socket, kRootFailed, g.failure, replyDeadline);
  } else {
    std::vector<PeerInfo> table(g.nranks);
    for (const Joined& j : g.ranks) table[j.hello.rank] = j.hello.info;
    for (const RootBlock& b : g.roots)
      for (const PeerInfo& p : b.records) table[p.rank] = p;
    RootReply reply{};
    reply.status = kRootOk;
    reply.nranks = g.nranks;
    reply.sessionSecret = randomSecret();
    while (reply.sessionSecret == secret) reply.sessionSecret = randomSecret();
    for (const Joined& j : g.ranks) sendTable(j.socket, reply, table, replyDeadline);
    for (const RootBlock& b : g.roots) sendTable(b.socket, reply, table, replyDeadline);
  }
  untrackRootFd(listener.fd());
}

ncclResult_t startDetachedRoot(UniqueIdContents* contents) {
  Interface itf;
  GYRE_CHECK(selectInterface(&itf));
  NetAddress bindAddr = itf.address;
  bindAddr.setPort(0);
  Socket listener;
  GYRE_CHECK(Socket::listenOn(bindAddr, &listener, &contents->root));
  contents->secret = randomSecret();
  contents->fixedAddress = false;
  trackRootFd(listener.fd());
  double timeout = initTimeoutSeconds();
  // No ForkHazard here: programs written for NCCL make the id and then fork
  // their ranks (NCCL's own examples do), and the children only connect to
  // this thread's socket; they never touch its state. The thread blocks in
  // accept() and holds none of gyre's locks while it waits.
  std::thread([l = std::move(listener), secret = contents->secret, timeout]() mutable {
    serveRendezvous(std::move(l), secret, timeout);
  }).detach();
  GYRE_INFO("INIT", "rendezvous root listening on %s", contents->root.toString().c_str());
  return ncclSuccess;
}

ncclResult_t startFixedRoot(const UniqueIdContents& contents, std::thread* thread) {
  GYRE_CHECK(checkProtectionPossible(LinkSecret{contents.secret, false, LinkPurpose::Rendezvous}, "init"));
  Socket listener;
  NetAddress bound;
  GYRE_CHECK(Socket::listenOn(contents.root, &listener, &bound));
  trackRootFd(listener.fd());
  *thread = std::thread([hazard = ForkHazard(), l = std::move(listener), secret = contents.secret,
                         timeout = initTimeoutSeconds()]() mutable {
    serveRendezvous(std::move(l), secret, timeout, /*secretRandom=*/false);
  });
  return ncclSuccess;
}

namespace {
// How long a refused root of a ncclGetUniqueId id is retried, in case the
// refusal is transient.
constexpr double kStaleRootGraceSeconds = 1.0;
}  // namespace

ncclResult_t checkRootReply(RootReply* reply, int nranks, const UniqueIdContents& id, const std::string& rootName) {
  // The message is printed: it must end inside the record, whoever wrote it.
  reply->message[sizeof(reply->message) - 1] = '\0';
  if (reply->status == kRootRefused && id.fixedAddress) {
    // The secret came from the address and the job id: name the inputs that differ between jobs.
    std::string job = launcherJobId();
    return fail(ncclRemoteError,
                "init failed: %s. With NCCL_COMM_ID the secret is derived from the address and the job id, "
                "which must be the same on every rank (this rank's: %s); is another job using %s?",
                reply->message, job.empty() ? "none set" : job.c_str(), id.root.toString().c_str());
  }
  if (reply->status != kRootOk)
    return fail(ncclRemoteError, "init failed: %s", reply->message[0] ? reply->message : "the root gave no reason");
  if (reply->nranks != nranks)
    return fail(ncclRemoteError, "init: the %s answered for %d ranks, expected %d", rootName.c_str(), reply->nranks,
                nranks);
  return ncclSuccess;
}

ncclResult_t checkPeerTable(const std::vector<PeerInfo>& peers, const std::string& rootName) {
  for (size_t r = 0; r < peers.size(); ++r) {
    const std::string why = peerInfoProblem(peers[r], static_cast<int>(r));
    if (!why.empty())
      return fail(ncclRemoteError, "init: the %s sent a malformed peer table: the record of rank %zu is wrong (%s)",
                  rootName.c_str(), r, why.c_str());
  }
  return ncclSuccess;
}

ncclResult_t joinRendezvous(const std::vector<UniqueIdContents>& ids, int rank, int nranks,
                            const PeerInfo& self, const Deadline& connectDeadline, const Deadline& deadline,
                            const std::atomic<bool>* abort, std::vector<PeerInfo>* peers,
                            LinkSecret* session) {
  const int nRoots = static_cast<int>(ids.size());
  const int rootIndex = rootOfRank(rank, nranks, nRoots);
  const UniqueIdContents& id = ids[rootIndex];
  // Errors name which of several roots failed, and where it was.
  const std::string rootName = nRoots == 1 ? "rendezvous root at " + id.root.toString()
                                           : "rendezvous root " + std::to_string(rootIndex) + " of " +
                                                 std::to_string(nRoots) + " (commIds[" +
                                                 std::to_string(rootIndex) + "]) at " + id.root.toString();
  std::string what = "init: joining the " + rootName;
  Socket s;
  // An id from ncclGetUniqueId names a root that listened before the id
  // existed: a refusal that lasts means its communicator ended or its process
  // exited, so say so now rather than at GYRE_INIT_TIMEOUT. (With NCCL_COMM_ID
  // rank 0 may simply not have started yet.)
  Deadline refusedDeadline = Deadline::afterSeconds(kStaleRootGraceSeconds);
  bool refused = false;
  if (Socket::connectTo(id.root, connectDeadline, abort, &s, what.c_str(),
                        id.fixedAddress ? nullptr : &refusedDeadline, &refused) != ncclSuccess) {
    if (refused)
      return fail(ncclInvalidArgument,
                  "init: the %s refused the connection: nothing listens there, so the unique "
                  "id is stale (its communicator was already created and finished) or the process that made "
                  "it exited", rootName.c_str());
    // The last attempt's error says which: nothing listening, or no route
    // from this rank's network (a namespace or interface without one).
    const std::string cause = lastErrorText();
    const std::string ifname = env::getString("NCCL_SOCKET_IFNAME");
    const std::string from = " [this rank: " + NetAddress::fromWire(self.listen).toString() +
                             (ifname.empty() ? "" : ", NCCL_SOCKET_IFNAME=" + ifname) + "; last attempt: " + cause + "]";
    if (id.fixedAddress)
      return fail(ncclSystemError,
                  "init: rank 0, which hosts the rendezvous at %s (NCCL_COMM_ID), did not join before "
                  "GYRE_INIT_TIMEOUT; nothing accepted connections there%s", id.root.toString().c_str(), from.c_str());
    return fail(ncclSystemError,
                "init: could not reach the %s before GYRE_INIT_TIMEOUT (is the unique id "
                "stale, or did the process that made it exit?)%s", rootName.c_str(), from.c_str());
  }
  // Every rank knows the same facts about the ids, so all agree on this.
  const LinkSecret rootLink{id.secret, !id.fixedAddress, LinkPurpose::Rendezvous};
  bool encrypt = false;
  GYRE_CHECK(chooseProtection(s.fd(), rootLink, &encrypt, what.c_str()));
  if (encrypt) GYRE_CHECK(secureConnect(s, rootLink, id.root, deadline, abort, "the " + rootName));
  RootHello hello{};
  memcpy(hello.magic, kRootHelloMagic, sizeof(hello.magic));
  hello.secret = id.secret;
  hello.rank = rank;
  hello.nranks = nranks;
  hello.nRoots = nRoots;
  hello.rootIndex = rootIndex;
  hello.firstRoot = ids[0].root.toWire();
  hello.firstRootSecret = ids[0].secret;
  hello.info = self;
  GYRE_CHECK(s.sendAll(&hello, sizeof(hello), deadline, abort, what.c_str()));
  RootReply reply{};
  if (s.recvAll(&reply, sizeof(reply), deadline, abort, what.c_str()) != ncclSuccess) {
    if (s.cipherFailed()) return ncclRemoteError;  // e.g. authentication failed, as recorded
    return fail(ncclRemoteError,
                "init: no answer from the %s (it exited or timed out, or the unique id is "
                "stale and something else now listens there)", rootName.c_str());
  }
  GYRE_CHECK(checkRootReply(&reply, nranks, id, rootName));
  peers->resize(nranks);
  GYRE_CHECK(s.recvAll(peers->data(), nranks * sizeof(PeerInfo), deadline, abort, what.c_str()));
  GYRE_CHECK(checkPeerTable(*peers, rootName));
  // With NCCL_COMM_ID and no user key nothing kept the session secret off
  // the wire: it keys nothing either (every rank decides the same).
  bool haveKey = false;
  std::vector<unsigned char> key;
  GYRE_CHECK(userKey(&key, &haveKey));
  if (!key.empty()) wipe(key.data(), key.size());
  *session = LinkSecret{reply.sessionSecret, !id.fixedAddress || haveKey, LinkPurpose::Session};
  return ncclSuccess;
}

}  // namespace gyre
