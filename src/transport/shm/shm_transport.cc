#include "src/transport/shm/shm_transport.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <tuple>

#include "src/bootstrap/bootstrap.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/transport/abort_notice.h"
#include "src/transport/shm/futex.h"
#include "src/transport/shm/shm_handshake.h"
#include "src/transport/shm/shm_segment.h"

namespace gyre {
namespace {

struct ShmConn {
  ShmMapping map;
  int sock = -1;              // the handshake socket, kept as the liveness channel
  int rank = -1;              // this rank
  int nranks = 0;             // the communicator's size (0: unknown), to check abort notices
  ShmEndpoint self;           // this rank's listener, held while the connection lives
  bool holdsListener = false;
  uint64_t lastWoken = 0;     // this side's counter when wakePeer last looked
  std::string what;           // "shared memory to rank 3 (host)" for messages
};

ShmEndpoint endpointOf(Bootstrap* b, int rank) {
  ShmEndpoint e;
  e.secret = b->secret();
  e.rank = rank;
  e.addressHash = fnv1a(&b->peers()[rank].listen, sizeof(WireAddress));
  return e;
}

ShmConn* start(const ConnectContext& ctx, int peer, bool isSend, Connection* out) {
  auto* s = new ShmConn();
  out->state = s;  // from here on close() releases whatever was made
  s->what = std::string(isSend ? "shared memory to rank " : "shared memory from rank ") + std::to_string(peer) +
            " (" + ctx.bootstrap->peers()[peer].host + ")";
  s->rank = ctx.rank;
  s->nranks = ctx.bootstrap->nranks();
  s->self = endpointOf(ctx.bootstrap, ctx.rank);
  return s;
}

void finish(ShmConn* s, Connection* out) {
  s->map.fillFifo(&out->fifo);
  out->needsProgress = false;  // no bytes to move: both executors use the same FIFO
  out->sharedCounters = true;
}

class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "shm"; }
  std::string via(const Connection&) const override { return "SHM"; }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    int64_t disabled = 0;
    if (env::getInt("NCCL_SHM_DISABLE", &disabled) != ncclSuccess || disabled) return false;
    // Device communicators need the segment registered with CUDA first; they
    // keep using sockets until the device executor does that.
    return self.hostHash == peer.hostHash && self.isHostComm && peer.isHostComm;
  }

  ncclResult_t connectSend(const ConnectContext& ctx, int peer, Connection* out) override {
    ShmConn* s = start(ctx, peer, true, out);
    GYRE_CHECK(shmAcquireListener(s->self));  // first: peers sending to this rank may be waiting for it
    s->holdsListener = true;
    int memfd = -1;
    GYRE_CHECK(createShmSegment(ctx.bootstrap->secret(), ctx.rank, peer, ctx.channel, ctx.slotBytes, &memfd,
                                &s->map));
    ncclResult_t r = shmSendSegment(endpointOf(ctx.bootstrap, peer), ctx.rank, ctx.channel, ctx.slotBytes, memfd,
                                    ctx.deadline, ctx.abort, &s->sock, s->what.c_str());
    ::close(memfd);  // the mapping (and the descriptor in flight) keep the segment
    GYRE_CHECK(r);
    finish(s, out);
    return ncclSuccess;
  }

  ncclResult_t connectRecv(const ConnectContext& ctx, int peer, Connection* out) override {
    ShmConn* s = start(ctx, peer, false, out);
    GYRE_CHECK(shmAcquireListener(s->self));
    s->holdsListener = true;
    ShmHello hello{};
    int memfd = -1;
    GYRE_CHECK(shmAcceptSegment(s->self, peer, ctx.channel, ctx.deadline, ctx.abort, &hello, &s->sock, &memfd,
                                s->what.c_str()));
    ncclResult_t r;
    if (hello.slotBytes != ctx.slotBytes)
      r = fail(ncclInvalidUsage, "%s: rank %d uses %llu-byte steps, this rank %zu (NCCL_BUFFSIZE differs)",
               s->what.c_str(), peer, static_cast<unsigned long long>(hello.slotBytes), ctx.slotBytes);
    else
      r = mapShmSegment(memfd, ctx.bootstrap->secret(), peer, ctx.rank, ctx.channel, ctx.slotBytes, &s->map);
    ::close(memfd);
    GYRE_CHECK(r);
    finish(s, out);
    return ncclSuccess;
  }

  // Runs only when the executor is about to sleep: the data path needs no help.
  ncclResult_t progress(Connection& conn, int* culprit) override {
    auto* s = static_cast<ShmConn*>(conn.state);
    if (!peerClosedOf(conn)) {
      char byte;
      ssize_t n = recv(s->sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) markPeerClosed(conn);
    }
    // Read after the liveness check: a peer writes its notice before it exits.
    const ShmHeader* h = s->map.header();
    int notice = __atomic_load_n(conn.isSend ? &h->receiverAbort : &h->senderAbort, __ATOMIC_ACQUIRE);
    if (notice > 0) {
      const uint64_t named = static_cast<uint64_t>(notice - 1);
      // Notices travel both ways here, so the rank blamed may be this one.
      return failFromAbortNotice(named, s->rank, conn.peer, s->nranks, culprit);
    }
    // A receiver that left cannot consume what is still in the FIFO. (A sender
    // that left is reported by the executor when it waits for its data: what
    // it sent before leaving is still valid.)
    if (conn.isSend && peerClosedOf(conn) && loadAcquire(conn.fifo.head) != conn.step) {
      *culprit = conn.peer;
      const uint64_t left = conn.step - loadAcquire(conn.fifo.head);
      return fail(ncclRemoteError, "%s: rank %d closed its connection with %llu step%s unconsumed; it died, "
                  "aborted or left the collective", s->what.c_str(), conn.peer,
                  static_cast<unsigned long long>(left), left == 1 ? "" : "s");
    }
    return ncclSuccess;
  }

  // Only the poll() path (ranks also waiting on sockets) uses this: readable
  // means the peer closed or died.
  bool pollRequest(const Connection& conn, pollfd* out) const override {
    auto* s = static_cast<ShmConn*>(conn.state);
    if (peerClosedOf(conn)) return false;
    out->fd = s->sock;
    out->events = POLLIN;
    out->revents = 0;
    return true;
  }

  void sendAbortNotice(Connection& conn, int culprit) override {
    auto* s = static_cast<ShmConn*>(conn.state);
    if (!s || !s->map.base) return;
    ShmHeader* h = s->map.header();
    __atomic_store_n(conn.isSend ? &h->senderAbort : &h->receiverAbort, culprit + 1, __ATOMIC_RELEASE);
    // The peer may be asleep on either counter.
    futexWakeAll(&h->tail);
    futexWakeAll(&h->head);
  }

  void close(Connection& conn) override {
    auto* s = static_cast<ShmConn*>(conn.state);
    if (!s) return;
    s->map.unmap();
    if (s->sock >= 0) ::close(s->sock);  // the peer sees EOF
    if (s->holdsListener) shmReleaseListener(s->self);
    delete s;
    conn.state = nullptr;
    conn.fifo = Fifo{};
  }

  bool sleepWord(const Connection& conn, SleepWord* out) const override {
    auto* s = static_cast<ShmConn*>(conn.state);
    ShmHeader* h = s->map.header();
    out->counter = conn.isSend ? &h->head : &h->tail;
    out->sleepers = conn.isSend ? &h->headSleepers : &h->tailSleepers;
    return true;
  }

  void wakePeer(Connection& conn) override {
    auto* s = static_cast<ShmConn*>(conn.state);
    if (conn.step == s->lastWoken) return;  // this side's counter has not moved
    s->lastWoken = conn.step;
    ShmHeader* h = s->map.header();
    // Pairs with the sleeper's increment-then-load (progress.cc): either it
    // sees the new counter and does not sleep, or this load sees it counted.
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (conn.isSend) {
      if (__atomic_load_n(&h->tailSleepers, __ATOMIC_RELAXED)) futexWakeAll(&h->tail);
    } else {
      if (__atomic_load_n(&h->headSleepers, __ATOMIC_RELAXED)) futexWakeAll(&h->head);
    }
  }
};

}  // namespace

Transport* shmTransport() {
  static ShmTransport t;
  return &t;
}

ncclResult_t shmConnectLocalPair(size_t slotBytes, int senderRank, int receiverRank, Connection* send,
                                 Connection* recv) {
  constexpr uint64_t kSecret = 0x5e1f;
  auto* s = new ShmConn();
  auto* r = new ShmConn();
  s->what = "shared memory to rank " + std::to_string(receiverRank);
  r->what = "shared memory from rank " + std::to_string(senderRank);
  int memfd = -1, pair[2] = {-1, -1};
  ncclResult_t res = createShmSegment(kSecret, senderRank, receiverRank, 0, slotBytes, &memfd, &s->map);
  if (res == ncclSuccess) {
    res = mapShmSegment(memfd, kSecret, senderRank, receiverRank, 0, slotBytes, &r->map);
    ::close(memfd);
  }
  if (res == ncclSuccess && socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
    res = fail(ncclSystemError, "socketpair failed (%s)", strerror(errno));
  if (res != ncclSuccess) {
    s->map.unmap();
    r->map.unmap();
    delete s;
    delete r;
    return res;
  }
  s->sock = pair[0];
  r->sock = pair[1];
  s->rank = senderRank;
  r->rank = receiverRank;
  for (auto [conn, state, isSend] : {std::tuple{send, s, true}, std::tuple{recv, r, false}}) {
    *conn = Connection{};
    conn->peer = isSend ? receiverRank : senderRank;
    conn->isSend = isSend;
    conn->transport = shmTransport();
    conn->state = state;
    finish(state, conn);
  }
  return ncclSuccess;
}

}  // namespace gyre
