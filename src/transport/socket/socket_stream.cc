#include "src/transport/socket/socket_stream.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/transport/abort_notice.h"
#include "src/transport/socket/socket_wire.h"

namespace gyre::socket_detail {
namespace {

// Where step `step`'s payload leaves from: the user's buffer the executor
// named, or the slot.
char* payloadSource(Connection& conn, uint64_t step) {
  const char* user = conn.pointers->sendFrom[step % kFifoSlots];
  return user ? const_cast<char*>(user) : conn.fifo.slot(step);
}

// The user buffer the executor offered for step `step`'s payload of `bytes`, or null.
char* offeredDestination(const Connection& conn, uint64_t step, uint32_t bytes) {
  const PayloadPointers& p = *conn.pointers;
  return p.offerStep == step && p.offerBytes == bytes && bytes > 0 ? p.offerDst : nullptr;
}

// A payload taken from or read into a user buffer (PayloadPointers) that is
// not this process's memory, or not writable: the kernel says EFAULT where a
// copy by the executor would have crashed. The fault is this rank's.
ncclResult_t unreadableBuffer(SocketConn* s, const Connection& conn, const char* at, uint32_t bytes, int* culprit) {
  *culprit = s->rank;
  return fail(ncclInvalidArgument, "%s: the %s buffer at %p (%u bytes of this step) is not %s memory of this process "
              "(freed or unmapped during the call?)", s->what.c_str(), conn.isSend ? "send" : "receive",
              static_cast<const void*>(at), bytes, conn.isSend ? "readable" : "writable");
}

}  // namespace

bool payloadAwaitsOffer(const SocketConn* s, const Connection& conn) {
  return conn.pointers && s->incomingBytes == sizeof(SlotMeta) && s->incoming.bytes >= kByPointerMinBytes &&
         !offeredDestination(conn, s->recvd, s->incoming.bytes) && loadAcquire(&s->head) < s->recvd;
}

// Sends as many control messages as the socket takes right now, then
// publishes the steps that have wholly left.
ncclResult_t progressSend(SocketConn* s, Connection& conn, int* culprit) {
  if (s->data) GYRE_CHECK(s->data->check(culprit));
  for (;;) {
    if (s->sent == loadAcquire(&s->tail)) break;
    const SlotMeta& m = conn.fifo.metaOf(s->sent);
    const bool split = s->split(m.bytes);
    const size_t payload = split ? 0 : m.bytes;
    iovec iov[2];
    int iovcnt = 0;
    if (s->partialBytes < sizeof(SlotMeta))
      iov[iovcnt++] = {const_cast<char*>(reinterpret_cast<const char*>(&m)) + s->partialBytes,
                       sizeof(SlotMeta) - s->partialBytes};
    size_t payloadDone = s->partialBytes > sizeof(SlotMeta) ? s->partialBytes - sizeof(SlotMeta) : 0;
    char* from = payloadSource(conn, s->sent);
    if (payload > payloadDone) iov[iovcnt++] = {from + payloadDone, payload - payloadDone};
    // Encrypted, a send that says EAGAIN holds its record and is retried
    // with these same bytes on the next pass (partialBytes has not moved).
    ssize_t n = s->socket.sendv(iov, iovcnt);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
      if (errno == EFAULT) return unreadableBuffer(s, conn, from, m.bytes, culprit);
      *culprit = conn.peer;
      return fail(ncclRemoteError, "%s: connection lost (%s): rank %d died or aborted", s->what.c_str(),
                  s->socket.errorText(errno).c_str(), conn.peer);
    }
    s->partialBytes += static_cast<size_t>(n);
    if (s->partialBytes < sizeof(SlotMeta) + payload) break;
    s->partialBytes = 0;
    uint64_t job = 0;
    if (split) GYRE_CHECK(s->data->post(m.bytes, from, &job));
    s->stepJob[s->sent % kFifoSlots] = split ? job + 1 : 0;
    ++s->sent;
  }
  uint64_t head = s->head;
  while (head < s->sent && s->stepDone(head)) ++head;
  if (head != s->head) storeRelease(&s->head, head);
  return ncclSuccess;
}

// Publishes, in order, the received steps whose pieces have all arrived.
void publishReceived(SocketConn* s, Connection& conn) {
  uint64_t tail = s->tail;
  while (tail < s->recvd && s->stepDone(tail)) ++tail;
  if (tail != s->tail) storeRelease(&s->tail, tail);
  // Data still on its way through the data sockets is not lost yet.
  if (s->controlClosed && tail == s->recvd) markPeerClosed(conn);
}

// Claims the next slot for the message whose header is in s->incoming. A
// payload the helpers carry lands where the executor offered (if it did) or
// in the slot; one read inline is already where s->incomingDst says.
ncclResult_t claimSlot(SocketConn* s, Connection& conn) {
  conn.fifo.metaOf(s->recvd) = s->incoming;
  uint64_t job = 0;
  const bool split = s->split(s->incoming.bytes);
  if (split) {
    s->incomingDst = offeredDestination(conn, s->recvd, s->incoming.bytes);
    GYRE_CHECK(s->data->post(s->incoming.bytes, s->incomingDst ? s->incomingDst : conn.fifo.slot(s->recvd), &job));
  }
  s->stepJob[s->recvd % kFifoSlots] = split ? job + 1 : 0;
  conn.pointers->recvAt[s->recvd % kFifoSlots] = s->incomingDst;
  s->incomingDst = nullptr;
  ++s->recvd;
  s->incomingBytes = 0;
  return ncclSuccess;
}

ssize_t readControl(SocketConn* s, char* dst, size_t want, bool* drained) {
  if (s->aheadPos == s->aheadEnd) {
    if (*drained) {
      errno = EAGAIN;
      return -1;
    }
    // A short read means the kernel had no more, unless the record layer
    // still holds decrypted bytes the kernel no longer shows.
    if (want >= kReadAheadBytes) {
      const iovec v{dst, want};
      ssize_t n = s->socket.recvv(&v, 1);
      *drained = n > 0 && static_cast<size_t>(n) < want && !s->socket.hasBufferedInput();
      return n;
    }
    if (s->ahead.empty()) s->ahead.resize(kReadAheadBytes);
    const iovec v{s->ahead.data(), s->ahead.size()};
    ssize_t n = s->socket.recvv(&v, 1);
    if (n <= 0) return n;
    *drained = static_cast<size_t>(n) < s->ahead.size() && !s->socket.hasBufferedInput();
    s->aheadPos = 0;
    s->aheadEnd = static_cast<size_t>(n);
  }
  size_t n = std::min(want, s->aheadEnd - s->aheadPos);
  memcpy(dst, s->ahead.data() + s->aheadPos, n);
  s->aheadPos += n;
  return static_cast<ssize_t>(n);
}

ncclResult_t progressRecv(SocketConn* s, Connection& conn, int* culprit) {
  if (s->data) GYRE_CHECK(s->data->check(culprit));
  bool drained = false;  // this pass's last recv() came back short (readControl)
  // Nothing is read after an abort notice (the peer's last message); it is
  // reported again on every pass, after the steps the helpers finished.
  while (!s->controlClosed && s->noticeCulprit < 0) {
    char* dst;
    size_t want;
    if (s->incomingBytes < sizeof(SlotMeta)) {
      // Headers are read even when every slot is full, so an abort notice from
      // the peer is seen while this rank waits on something else.
      dst = reinterpret_cast<char*>(&s->incoming) + s->incomingBytes;
      want = sizeof(SlotMeta) - s->incomingBytes;
    } else {
      if (s->recvd - loadAcquire(&s->head) >= kFifoSlots) break;  // no free slot yet
      if (payloadAwaitsOffer(s, conn)) break;
      if (s->split(s->incoming.bytes)) {  // the payload comes through the helpers
        GYRE_CHECK(claimSlot(s, conn));
        continue;
      }
      size_t done = s->incomingBytes - sizeof(SlotMeta);
      // Where the payload goes is decided before its first byte is read.
      if (done == 0) s->incomingDst = offeredDestination(conn, s->recvd, s->incoming.bytes);
      dst = (s->incomingDst ? s->incomingDst : conn.fifo.slot(s->recvd)) + done;
      want = s->incoming.bytes - done;
    }
    size_t got = 0;
    if (want > 0) {
      ssize_t n = readControl(s, dst, want, &drained);
      if (n == 0) {
        if (s->incomingBytes == 0) {
          s->controlClosed = true;  // at a message boundary: an error only if more data is awaited
          break;
        }
        *culprit = conn.peer;
        return fail(ncclRemoteError, "%s: rank %d closed the connection in the middle of a message (the process "
                    "died or aborted)", s->what.c_str(), conn.peer);
      }
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
        if (errno == EFAULT) return unreadableBuffer(s, conn, s->incomingDst, s->incoming.bytes, culprit);
        *culprit = conn.peer;
        return fail(ncclRemoteError, "%s: connection to rank %d lost (%s)", s->what.c_str(), conn.peer,
                    s->socket.errorText(errno).c_str());
      }
      got = static_cast<size_t>(n);
    }
    s->incomingBytes += got;
    if (s->incomingBytes == sizeof(SlotMeta) && got > 0) {
      const ncclResult_t r = checkIncomingHeader(s->incoming, conn.fifo.slotBytes, conn.peer, s->nranks,
                                                 s->what, &s->noticeCulprit);
      if (r != ncclSuccess) {
        *culprit = conn.peer;
        return r;
      }
      if (s->noticeCulprit >= 0) break;
    }
    if (s->incomingBytes >= sizeof(SlotMeta) && !s->split(s->incoming.bytes) &&
        s->incomingBytes == sizeof(SlotMeta) + s->incoming.bytes) {
      if (s->recvd - loadAcquire(&s->head) >= kFifoSlots) break;  // header of a zero-byte step
      GYRE_CHECK(claimSlot(s, conn));
      continue;
    }
    if (got == 0) break;
  }
  publishReceived(s, conn);
  if (s->noticeCulprit >= 0) {
    *culprit = s->noticeCulprit;
    return failFromAbortNotice(s->incoming.count, s->rank, conn.peer, s->nranks);  // the notice, never overwritten
  }
  return ncclSuccess;
}

}  // namespace gyre::socket_detail
