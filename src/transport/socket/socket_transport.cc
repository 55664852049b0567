#include "src/transport/socket/socket_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <memory>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/socket/socket_wire.h"
#include "src/transport/socket/socket_stream.h"

namespace gyre {
namespace {

using socket_detail::DataPath;
using socket_detail::SocketConn;
using socket_detail::SocketCounts;
using socket_detail::SocketParams;
using socket_detail::checkSocketParams;
using socket_detail::readCounts;

// Data socket i of a channel gets its own tag, above every control tag.
constexpr int32_t kDataTagStride = 1 << 20;

int transportTag(int channel) { return kTagTransportBase + channel; }
int dataTag(int channel, int i) { return transportTag(channel) + (i + 1) * kDataTagStride; }

bool peerIsLoopback(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  if (ss.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr.s_addr) >> 24) == 127;
  if (ss.ss_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
}

// Loopback has no congestion to control, but a pacing algorithm (BBR, a common
// system default) still paces lo at its own estimate of the bandwidth, and
// it retransmitted spuriously on lo (ss: bytes_retrans, dsack_dups; a
// pacing_rate of ~2.6 GB/s). Reno took 4-rank socket
// AllReduce at 4-8 MiB from 0.85-0.95x to 1.3-1.45x Open MPI's busbw (2 cores).
// Reno is built into every kernel; where the system forbids it, nothing changes.
void unpacedOnLoopback(int fd) {
  static const char kReno[] = "reno";
  if (peerIsLoopback(fd)) (void)setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, kReno, sizeof(kReno) - 1);
}

void initFifo(SocketConn* s, size_t slotBytes, Connection* out) {
  s->slots.assign(kFifoSlots * slotBytes, 0);
  out->fifo.slots = s->slots.data();
  out->fifo.slotBytes = slotBytes;
  out->fifo.meta = s->meta;
  out->fifo.tail = &s->tail;
  out->fifo.head = &s->head;
  out->needsProgress = true;
  out->pointers = &s->pointers;
  out->state = s;
}

class SocketTransport final : public Transport {
 public:
  const char* name() const override { return "socket"; }
  std::string via(const Connection&) const override { return "NET/Socket/0"; }
  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return true; }

  // Connects the control socket and then the data sockets without waiting for
  // the receiver: every rank connects all its sends before accepting, so a
  // reply awaited here could deadlock a ring. The receiver checks the counts.
  ncclResult_t connectSend(const ConnectContext& ctx, int peer, Connection* out) override {
    SocketCounts counts;
    GYRE_CHECK(readCounts(&counts));
    auto* s = new SocketConn();
    s->rank = ctx.rank;
    s->nranks = ctx.bootstrap->nranks();
    s->what = "socket to rank " + std::to_string(peer) + " (" + ctx.bootstrap->peers()[peer].host + ")";
    out->state = s;
    NetAddress addr = NetAddress::fromWire(ctx.bootstrap->peers()[peer].listen);
    GYRE_CHECK(connectToPeer(addr, ctx.bootstrap->link(), ctx.rank, transportTag(ctx.channel), ctx.deadline,
                             ctx.abort, &s->socket, s->what.c_str()));
    unpacedOnLoopback(s->socket.fd());
    SocketParams params{ctx.slotBytes, counts.nthreads, counts.nsocks};
    GYRE_CHECK(s->socket.sendAll(&params, sizeof(params), ctx.deadline, ctx.abort, s->what.c_str()));
    if (counts.total() > 1) {
      s->data = std::make_unique<DataPath>(true, counts.nthreads, counts.nsocks, s->what, ctx.rank, peer,
                                         ctx.helperNuma);
      for (int i = 0; i < counts.total(); ++i) {
        GYRE_CHECK(connectToPeer(addr, ctx.bootstrap->link(), ctx.rank, dataTag(ctx.channel, i), ctx.deadline,
                                 ctx.abort, &s->data->socket(i), s->what.c_str()));
        unpacedOnLoopback(s->data->socket(i).fd());
      }
    }
    initFifo(s, ctx.slotBytes, out);
    if (s->data) GYRE_CHECK(s->data->init(s->socket.fd()));
    return ncclSuccess;
  }

  ncclResult_t connectRecv(const ConnectContext& ctx, int peer, Connection* out) override {
    SocketCounts counts;
    GYRE_CHECK(readCounts(&counts));
    auto* s = new SocketConn();
    s->rank = ctx.rank;
    s->nranks = ctx.bootstrap->nranks();
    s->what = "socket from rank " + std::to_string(peer) + " (" + ctx.bootstrap->peers()[peer].host + ")";
    out->state = s;
    GYRE_CHECK(ctx.bootstrap->acceptor().acceptFrom(peer, transportTag(ctx.channel), ctx.deadline, ctx.abort,
                                                    &s->socket));
    unpacedOnLoopback(s->socket.fd());
    SocketParams params{};
    GYRE_CHECK(s->socket.recvAll(&params, sizeof(params), ctx.deadline, ctx.abort, s->what.c_str()));
    GYRE_CHECK(checkSocketParams(params, ctx.slotBytes, counts, s->what, peer, ctx.rank));
    if (counts.total() > 1) {
      s->data = std::make_unique<DataPath>(false, counts.nthreads, counts.nsocks, s->what, ctx.rank, peer,
                                         ctx.helperNuma);
      for (int i = 0; i < counts.total(); ++i) {
        GYRE_CHECK(ctx.bootstrap->acceptor().acceptFrom(peer, dataTag(ctx.channel, i), ctx.deadline, ctx.abort,
                                                        &s->data->socket(i)));
        unpacedOnLoopback(s->data->socket(i).fd());
      }
    }
    initFifo(s, ctx.slotBytes, out);
    if (s->data) GYRE_CHECK(s->data->init(s->socket.fd()));
    return ncclSuccess;
  }

  ncclResult_t progress(Connection& conn, int* culprit) override {
    auto* s = static_cast<SocketConn*>(conn.state);
    return conn.isSend ? progressSend(s, conn, culprit) : progressRecv(s, conn, culprit);
  }

  bool pollRequest(const Connection& conn, pollfd* out) const override {
    auto* s = static_cast<SocketConn*>(conn.state);
    bool control, helpers;  // waiting on the control socket, on the helpers
    short events;
    if (conn.isSend) {
      events = POLLOUT;
      control = s->sent != loadAcquire(&s->tail);
      helpers = s->head != s->sent;
    } else {
      // A payload held for an offer waits on the executor, not on the socket.
      control = !s->controlClosed &&
                (s->incomingBytes < sizeof(SlotMeta) ||
                 (s->recvd - loadAcquire(&s->head) < kFifoSlots && !payloadAwaitsOffer(s, conn)));
      // Decrypted bytes the record layer holds make no POLLIN: wait on
      // POLLOUT instead, which this receiving socket (it sends nothing but an
      // abort notice) always has, so the executor comes back at once.
      events = control && s->socket.hasBufferedInput() ? POLLOUT : POLLIN;
      helpers = s->tail != s->recvd;
    }
    out->revents = 0;
    if (!s->data) {
      out->fd = s->socket.fd();
      out->events = events;
      return control;
    }
    if (!control && !helpers) return false;
    out->fd = s->data->pollFd(control ? events : 0);
    out->events = POLLIN;
    return true;
  }

  void sendAbortNotice(Connection& conn, int culprit) override {
    auto* s = static_cast<SocketConn*>(conn.state);
    // Mid-message (or mid-record): just close.
    if (!conn.isSend || !s || !s->socket.valid() || s->partialBytes != 0 || s->socket.hasPendingOutput()) return;
    SlotMeta notice{};
    notice.flags = kMetaAbort;
    notice.count = static_cast<uint64_t>(culprit);
    // Not through fail(): a failure here must not replace the error being reported.
    const iovec v{&notice, sizeof(notice)};
    (void)s->socket.sendv(&v, 1);
  }

  // Stops and joins the helper threads before the slots they use go away.
  void close(Connection& conn) override {
    auto* s = static_cast<SocketConn*>(conn.state);
    if (s) s->data.reset();
    delete s;
    conn.state = nullptr;
    conn.pointers = nullptr;
    conn.fifo = Fifo{};
  }
};

}  // namespace

Transport* socketTransport() {
  static SocketTransport t;
  return &t;
}

}  // namespace gyre
