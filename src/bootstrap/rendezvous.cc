#include "src/bootstrap/rendezvous.h"

#include <pthread.h>

#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/pending_hellos.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

// A connection that does not send a full hello this fast is not a gyre rank.
constexpr double kHelloSeconds = 2.0;
// Like NCCL's root, wait long for the first rank (the id may travel slowly to
// the ranks); once one has joined the others get GYRE_INIT_TIMEOUT.
constexpr double kFirstArrivalSeconds = 3600.0;

struct Joined {
  Socket socket;
  RootHello hello;
};

void sendReply(const Socket& s, int32_t status, const std::string& message, const Deadline& deadline) {
  RootReply reply{};
  reply.status = status;
  snprintf(reply.message, sizeof(reply.message), "%s", message.c_str());
  s.sendAll(&reply, sizeof(reply), deadline, nullptr, "rendezvous root: reply");
}

std::string listRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) out += ", ...";
  return out;
}

// Listener fds of roots owned by this process. A forked child has no root
// thread, so it closes its copies: otherwise a dead root's port would stay open
// in every child and stale ids would hang instead of being refused.
std::mutex rootFdsMutex;
std::set<int> rootFds;
void closeRootFdsInChild() {
  for (int fd : rootFds) close(fd);
  rootFds.clear();
}
void trackRootFd(int fd) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, closeRootFdsInChild); });
  std::lock_guard<std::mutex> lock(rootFdsMutex);
  rootFds.insert(fd);
}
void untrackRootFd(int fd) {
  std::lock_guard<std::mutex> lock(rootFdsMutex);
  rootFds.erase(fd);
}

double initTimeoutSeconds() {
  int64_t t = 120;
  if (env::getInt("GYRE_INIT_TIMEOUT", &t) != ncclSuccess) t = 120;
  return static_cast<double>(t);
}

}  // namespace

void serveRendezvous(Socket listener, uint64_t secret, double timeoutSeconds) {
  Deadline deadline = Deadline::afterSeconds(kFirstArrivalSeconds);
  std::vector<Joined> joined;
  int nranks = -1;
  std::string failure;
  PendingHellos<RootHello> pending;
  // Each caller's hello as it completes (or the caller fails to send one).
  auto onHello = [&](Socket& s, const NetAddress& from, const RootHello& hello, bool complete) {
    if (!failure.empty()) return;
    if (!complete || memcmp(hello.magic, kRootHelloMagic, sizeof(kRootHelloMagic)) != 0) {
      GYRE_WARN("rendezvous root: ignored a connection from %s that is not a gyre rank", from.toString().c_str());
      return;
    }
    if (hello.secret != secret) {
      GYRE_WARN("rendezvous root: refused rank %d from %s: its unique id's secret does not match "
                "(stale or foreign unique id)", hello.rank, from.toString().c_str());
      sendReply(s,
                kRootRefused,
                "the rendezvous root refused rank " + std::to_string(hello.rank) + " (connecting from " +
                    from.toString() + "): the unique id's secret does not match (stale or wrong unique id)",
                Deadline::afterSeconds(kHelloSeconds));
      return;
    }
    Joined j;
    j.socket = std::move(s);
    j.hello = hello;
    if (nranks < 0) {
      nranks = j.hello.nranks;
      deadline = Deadline::afterSeconds(timeoutSeconds);
    }
    if (j.hello.nranks != nranks) {
      failure = "rank " + std::to_string(j.hello.rank) + " called init with nranks=" +
                std::to_string(j.hello.nranks) + " but another rank used nranks=" + std::to_string(nranks);
    } else if (j.hello.rank < 0 || j.hello.rank >= nranks) {
      failure = "a rank joined with rank=" + std::to_string(j.hello.rank) + " outside 0.." +
                std::to_string(nranks - 1);
    } else {
      for (const Joined& other : joined)
        if (other.hello.rank == j.hello.rank)
          failure = "two processes joined as rank " + std::to_string(j.hello.rank) + " (" +
                    other.hello.info.host + " pid " + std::to_string(other.hello.info.pid) + " and " +
                    j.hello.info.host + " pid " + std::to_string(j.hello.info.pid) + ")";
    }
    joined.push_back(std::move(j));
  };
  for (;;) {
    pending.poll(onHello);
    if (!failure.empty() || (nranks >= 0 && static_cast<int>(joined.size()) >= nranks)) break;
    Socket s;
    NetAddress from;
    bool sliceEnded = false;
    if (acceptAround(listener, !pending.empty(), deadline, nullptr, "rendezvous root: accept", &s, &from,
                     &sliceEnded) != ncclSuccess)
      break;
    if (!sliceEnded) pending.add(std::move(s), from, kHelloSeconds);
  }
  Deadline replyDeadline = Deadline::afterSeconds(10);
  if (failure.empty() && (nranks < 0 || static_cast<int>(joined.size()) < nranks)) {
    std::vector<int> missing;
    for (int r = 0; r < nranks; ++r) {
      bool present = false;
      for (const Joined& j : joined) present |= j.hello.rank == r;
      if (!present) missing.push_back(r);
    }
    failure = (missing.size() == 1 ? "rank " : "ranks ") + listRanks(missing) + " of " +
              std::to_string(nranks) + " did not join the communicator within " +
              std::to_string(static_cast<int>(timeoutSeconds)) + " s (GYRE_INIT_TIMEOUT)";
  }
  if (!failure.empty()) {
    GYRE_WARN("rendezvous root: %s", failure.c_str());
    for (const Joined& j : joined) sendReply(j.socket, kRootFailed, failure, replyDeadline);
  } else {
    std::vector<PeerInfo> table(nranks);
    for (const Joined& j : joined) table[j.hello.rank] = j.hello.info;
    uint64_t session = randomSecret();
    while (session == secret) session = randomSecret();
    for (const Joined& j : joined) {
      RootReply reply{};
      reply.status = kRootOk;
      reply.nranks = nranks;
      reply.sessionSecret = session;
      if (j.socket.sendAll(&reply, sizeof(reply), replyDeadline, nullptr, "rendezvous root: reply") ==
          ncclSuccess)
        j.socket.sendAll(table.data(), table.size() * sizeof(PeerInfo), replyDeadline, nullptr,
                         "rendezvous root: peer table");
    }
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
  std::thread(serveRendezvous, std::move(listener), contents->secret, timeout).detach();
  GYRE_INFO("INIT", "rendezvous root listening on %s", contents->root.toString().c_str());
  return ncclSuccess;
}

ncclResult_t startFixedRoot(const UniqueIdContents& contents, std::thread* thread) {
  Socket listener;
  NetAddress bound;
  GYRE_CHECK(Socket::listenOn(contents.root, &listener, &bound));
  trackRootFd(listener.fd());
  *thread = std::thread(serveRendezvous, std::move(listener), contents.secret, initTimeoutSeconds());
  return ncclSuccess;
}

namespace {
// How long a refused root of a ncclGetUniqueId id is retried, in case the
// refusal is transient.
constexpr double kStaleRootGraceSeconds = 1.0;
}  // namespace

ncclResult_t joinRendezvous(const UniqueIdContents& id, int rank, int nranks, const PeerInfo& self,
                            const Deadline& connectDeadline, const Deadline& deadline,
                            const std::atomic<bool>* abort, std::vector<PeerInfo>* peers,
                            uint64_t* sessionSecret) {
  std::string what = "init: joining the rendezvous at " + id.root.toString();
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
                  "init: the rendezvous root at %s refused the connection: nothing listens there, so the unique "
                  "id is stale (its communicator was already created and finished) or the process that made "
                  "it exited", id.root.toString().c_str());
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
                "init: could not reach the rendezvous root at %s before GYRE_INIT_TIMEOUT (is the unique id "
                "stale, or did the process that made it exit?)%s", id.root.toString().c_str(), from.c_str());
  }
  RootHello hello{};
  memcpy(hello.magic, kRootHelloMagic, sizeof(hello.magic));
  hello.secret = id.secret;
  hello.rank = rank;
  hello.nranks = nranks;
  hello.info = self;
  GYRE_CHECK(s.sendAll(&hello, sizeof(hello), deadline, abort, what.c_str()));
  RootReply reply{};
  if (s.recvAll(&reply, sizeof(reply), deadline, abort, what.c_str()) != ncclSuccess)
    return fail(ncclRemoteError,
                "init: no answer from the rendezvous root at %s (it exited or timed out, or the unique id is "
                "stale and something else now listens there)", id.root.toString().c_str());
  if (reply.status == kRootRefused && id.fixedAddress) {
    // The secret came from the address and the job id: name the inputs that differ between jobs.
    std::string job = launcherJobId();
    return fail(ncclRemoteError,
                "init failed: %s. With NCCL_COMM_ID the secret is derived from the address and the job id, "
                "which must be the same on every rank (this rank's: %s); is another job using %s?",
                reply.message, job.empty() ? "none set" : job.c_str(), id.root.toString().c_str());
  }
  if (reply.status != kRootOk) return fail(ncclRemoteError, "init failed: %s", reply.message);
  if (reply.nranks != nranks)
    return fail(ncclInternalError, "init: root answered for %d ranks, expected %d", reply.nranks, nranks);
  peers->resize(nranks);
  GYRE_CHECK(s.recvAll(peers->data(), nranks * sizeof(PeerInfo), deadline, abort, what.c_str()));
  *sessionSecret = reply.sessionSecret;
  return ncclSuccess;
}

}  // namespace gyre
