#include "transport/socket/socket_transport.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstring>
#include <string>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

// Sent once by the connecting (sending) side after the ConnHello.
struct SocketParams {
  uint64_t slotBytes;
};

struct SocketConn {
  Socket socket;
  std::vector<char> slots;
  SlotMeta meta[kFifoSlots]{};
  uint64_t tail = 0;
  uint64_t head = 0;
  size_t partialBytes = 0;    // send: bytes of the current message already sent
  SlotMeta incoming{};        // recv: header of the message being received
  size_t incomingBytes = 0;   // recv: bytes of header+payload received so far
  std::string what;           // "socket to rank 3" for error messages
  int rank = -1;              // this rank
  bool closedCleanly = false;
};

int transportTag(int channel) { return kTagTransportBase + channel; }

void initFifo(SocketConn* s, size_t slotBytes, Connection* out) {
  s->slots.assign(kFifoSlots * slotBytes, 0);
  out->fifo.slots = s->slots.data();
  out->fifo.slotBytes = slotBytes;
  out->fifo.meta = s->meta;
  out->fifo.tail = &s->tail;
  out->fifo.head = &s->head;
  out->needsProgress = true;
  out->state = s;
}

// Sends as much of message `head` as the socket takes right now.
ncclResult_t progressSend(SocketConn* s, Connection& conn, int* culprit) {
  for (;;) {
    uint64_t tail = loadAcquire(&s->tail);
    if (s->head == tail) return ncclSuccess;
    const SlotMeta& m = conn.fifo.metaOf(s->head);
    size_t total = sizeof(SlotMeta) + m.bytes;
    iovec iov[2];
    int iovcnt = 0;
    if (s->partialBytes < sizeof(SlotMeta))
      iov[iovcnt++] = {const_cast<char*>(reinterpret_cast<const char*>(&m)) + s->partialBytes,
                       sizeof(SlotMeta) - s->partialBytes};
    size_t payloadDone = s->partialBytes > sizeof(SlotMeta) ? s->partialBytes - sizeof(SlotMeta) : 0;
    if (m.bytes > payloadDone) iov[iovcnt++] = {conn.fifo.slot(s->head) + payloadDone, m.bytes - payloadDone};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = iovcnt;
    ssize_t n = sendmsg(s->socket.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
      *culprit = conn.peer;
      return fail(ncclRemoteError, "%s: connection lost (%s): rank %d died or aborted", s->what.c_str(),
                  strerror(errno), conn.peer);
    }
    s->partialBytes += static_cast<size_t>(n);
    if (s->partialBytes < total) return ncclSuccess;
    s->partialBytes = 0;
    storeRelease(&s->head, s->head + 1);
  }
}

ncclResult_t progressRecv(SocketConn* s, Connection& conn, int* culprit) {
  if (conn.peerClosed) return ncclSuccess;
  for (;;) {
    char* dst;
    size_t want;
    if (s->incomingBytes < sizeof(SlotMeta)) {
      // Headers are read even when every slot is full, so an abort notice from
      // the peer is seen while this rank waits on something else.
      dst = reinterpret_cast<char*>(&s->incoming) + s->incomingBytes;
      want = sizeof(SlotMeta) - s->incomingBytes;
    } else {
      if (s->tail - loadAcquire(&s->head) >= kFifoSlots) return ncclSuccess;  // no free slot yet
      size_t done = s->incomingBytes - sizeof(SlotMeta);
      dst = conn.fifo.slot(s->tail) + done;
      want = s->incoming.bytes - done;
    }
    size_t got = 0;
    if (want > 0) {
      ssize_t n = recv(s->socket.fd(), dst, want, MSG_DONTWAIT);
      if (n == 0) {
        if (s->incomingBytes == 0) {
          conn.peerClosed = true;  // at a message boundary: an error only if more data is awaited
          return ncclSuccess;
        }
        *culprit = conn.peer;
        return fail(ncclRemoteError, "%s: rank %d closed the connection in the middle of a message (the process "
                    "died or aborted)", s->what.c_str(), conn.peer);
      }
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
        *culprit = conn.peer;
        return fail(ncclRemoteError, "%s: connection to rank %d lost (%s)", s->what.c_str(), conn.peer,
                    strerror(errno));
      }
      got = static_cast<size_t>(n);
    }
    s->incomingBytes += got;
    if (s->incomingBytes == sizeof(SlotMeta) && got > 0) {
      if (s->incoming.flags & kMetaAbort) {
        *culprit = static_cast<int>(s->incoming.count);
        // The peer may blame this rank: its call did not match, or it stalled.
        if (*culprit == s->rank)
          return fail(ncclRemoteError, "rank %d gave up on this rank (%d): it reports a mismatched call or a stalled "
                      "step from this rank (see rank %d's error)", conn.peer, s->rank, conn.peer);
        return fail(ncclRemoteError, "rank %d failed or stopped responding (reported by rank %d)", *culprit,
                    conn.peer);
      }
      if (s->incoming.bytes > conn.fifo.slotBytes) {
        *culprit = conn.peer;
        return fail(ncclInternalError, "%s: rank %d sent a %u-byte step into %zu-byte slots", s->what.c_str(),
                    conn.peer, s->incoming.bytes, conn.fifo.slotBytes);
      }
    }
    if (s->incomingBytes >= sizeof(SlotMeta) && s->incomingBytes == sizeof(SlotMeta) + s->incoming.bytes) {
      if (s->tail - loadAcquire(&s->head) >= kFifoSlots) return ncclSuccess;  // header of a zero-byte step
      conn.fifo.metaOf(s->tail) = s->incoming;
      s->incomingBytes = 0;
      storeRelease(&s->tail, s->tail + 1);
      continue;
    }
    if (got == 0) return ncclSuccess;
  }
}

class SocketTransport final : public Transport {
 public:
  const char* name() const override { return "socket"; }
  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return true; }

  ncclResult_t connectSend(const ConnectContext& ctx, int peer, Connection* out) override {
    auto* s = new SocketConn();
    s->rank = ctx.rank;
    s->what = "socket to rank " + std::to_string(peer) + " (" + ctx.bootstrap->peers()[peer].host + ")";
    out->state = s;
    NetAddress addr = NetAddress::fromWire(ctx.bootstrap->peers()[peer].listen);
    GYRE_CHECK(connectToPeer(addr, ctx.bootstrap->secret(), ctx.rank, transportTag(ctx.channel), ctx.deadline,
                             ctx.abort, &s->socket, s->what.c_str()));
    SocketParams params{ctx.slotBytes};
    GYRE_CHECK(s->socket.sendAll(&params, sizeof(params), ctx.deadline, ctx.abort, s->what.c_str()));
    initFifo(s, ctx.slotBytes, out);
    return ncclSuccess;
  }

  ncclResult_t connectRecv(const ConnectContext& ctx, int peer, Connection* out) override {
    auto* s = new SocketConn();
    s->rank = ctx.rank;
    s->what = "socket from rank " + std::to_string(peer) + " (" + ctx.bootstrap->peers()[peer].host + ")";
    out->state = s;
    GYRE_CHECK(ctx.bootstrap->acceptor().acceptFrom(peer, transportTag(ctx.channel), ctx.deadline, ctx.abort,
                                                    &s->socket));
    SocketParams params{};
    GYRE_CHECK(s->socket.recvAll(&params, sizeof(params), ctx.deadline, ctx.abort, s->what.c_str()));
    if (params.slotBytes != ctx.slotBytes)
      return fail(ncclInvalidUsage, "%s: rank %d uses %llu-byte steps, this rank %zu (NCCL_BUFFSIZE differs)",
                  s->what.c_str(), peer, static_cast<unsigned long long>(params.slotBytes), ctx.slotBytes);
    initFifo(s, ctx.slotBytes, out);
    return ncclSuccess;
  }

  ncclResult_t progress(Connection& conn, int* culprit) override {
    auto* s = static_cast<SocketConn*>(conn.state);
    return conn.isSend ? progressSend(s, conn, culprit) : progressRecv(s, conn, culprit);
  }

  bool pollRequest(const Connection& conn, pollfd* out) const override {
    auto* s = static_cast<SocketConn*>(conn.state);
    out->fd = s->socket.fd();
    out->revents = 0;
    if (conn.isSend) {
      out->events = POLLOUT;
      return s->head != loadAcquire(&s->tail);
    }
    out->events = POLLIN;
    if (conn.peerClosed) return false;
    return s->incomingBytes < sizeof(SlotMeta) || s->tail - loadAcquire(&s->head) < kFifoSlots;
  }

  void sendAbortNotice(Connection& conn, int culprit) override {
    auto* s = static_cast<SocketConn*>(conn.state);
    if (!conn.isSend || !s || !s->socket.valid() || s->partialBytes != 0) return;  // mid-message: just close
    SlotMeta notice{};
    notice.flags = kMetaAbort;
    notice.count = static_cast<uint64_t>(culprit);
    // Raw send: a failure here must not replace the error being reported.
    (void)::send(s->socket.fd(), &notice, sizeof(notice), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  void close(Connection& conn) override {
    auto* s = static_cast<SocketConn*>(conn.state);
    delete s;
    conn.state = nullptr;
    conn.fifo = Fifo{};
  }
};

}  // namespace

Transport* socketTransport() {
  static SocketTransport t;
  return &t;
}

}  // namespace gyre
