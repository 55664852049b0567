#include "forged_steps.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "../support/fork_ranks.h"

#include "src/call/coll_kind.h"
#include "src/comm/comm.h"
#include "src/host/peer_mappings.h"
#include "src/host/wait.h"
#include "src/transport/net/net_conn.h"
#include "src/transport/socket/socket_pieces.h"
#include "src/transport/socket/socket_stream.h"

namespace gyre::test {
namespace {

// How long a forger waits for the honest peer to make room or take bytes.
constexpr double kForgeWait_s = 5;

// Shared memory: the header into the step's line, the payload where a step
// of that many bytes keeps it, then the line's sequence word and tail, and
// the peer woken if it sleeps on tail. A step kFifoSlots ahead of what the
// receiver consumed waits for it, as an honest sender would.
std::string forgeShared(Connection& conn, const ForgedStep& step) {
  Fifo& f = conn.fifo;
  if (!f.hasLines()) return "the shared-memory connection has no slot lines";
  if (step.payload.size() > f.slotBytes) return "the payload is larger than a slot";
  const double until = monotonicSeconds() + kForgeWait_s;
  while (step.lineStep >= loadAcquire(f.head) + kFifoSlots)
    if (monotonicSeconds() > until) return "the receiver never made room for step " + std::to_string(step.lineStep);
  // An abort notice carries no payload, and memcpy may not be given an empty
  // vector's NULL data even for 0 bytes.
  if (!step.payload.empty())
    memcpy(f.payload(step.lineStep, step.payload.size()), step.payload.data(), step.payload.size());
  f.lineOf(step.lineStep).meta = step.meta;
  storeRelease(&f.lineOf(step.lineStep).seq, step.lineSeq);
  storeRelease(f.tail, step.lineStep + 1);
  conn.step = step.lineStep + 1;
  conn.transport->wakePeer(conn);
  return "";
}

// All of [data, data + bytes) onto the non-blocking socket `fd`, waiting in
// poll() while the peer's receive buffer is full.
std::string sendAll(int fd, const char* data, size_t bytes) {
  const double until = monotonicSeconds() + kForgeWait_s;
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = ::send(fd, data + done, bytes - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (monotonicSeconds() > until) return "the receiver took no more bytes";
      pollfd p{fd, POLLOUT, 0};
      (void)poll(&p, 1, 10);
      continue;
    }
    if (n <= 0) return std::string("send: ") + strerror(errno);
    done += static_cast<size_t>(n);
  }
  return "";
}

// Sockets: the header and the payload as one control message, as the
// socket transport frames a step; a header of a size that the data sockets
// carry goes alone, and the payload goes in pieces, one per data socket,
// cut and described as for a payload of its own size.
std::string forgeSocket(Connection& conn, const ForgedStep& step) {
  auto* s = static_cast<socket_detail::SocketConn*>(conn.state);
  const char* header = reinterpret_cast<const char*>(&step.meta);
  std::vector<char> frame(header, header + sizeof(SlotMeta));
  const bool pieces = s->split(step.meta.bytes);
  if (!pieces) frame.insert(frame.end(), step.payload.begin(), step.payload.end());
  std::string why = sendAll(s->socket.fd(), frame.data(), frame.size());
  for (int i = 0; pieces && why.empty() && i < s->data->sockets(); ++i) {
    const auto bytes = static_cast<uint32_t>(step.payload.size());
    size_t off = 0, len = 0;
    socket_detail::pieceRange(bytes, s->data->sockets(), i, &off, &len);
    socket_detail::PieceHeader h{static_cast<uint32_t>(step.lineStep), bytes, static_cast<uint32_t>(off),
                                 static_cast<uint32_t>(len)};
    if (step.lieInPiece) step.lieInPiece(i, &h);
    why = sendAll(s->data->socket(i).fd(), reinterpret_cast<const char*>(&h), sizeof(h));
    if (why.empty()) why = sendAll(s->data->socket(i).fd(), step.payload.data() + off, len);
  }
  return why;
}

// A network (IB): the header and the payload as the step's two messages,
// through the network's own isend, from the connection's registered FIFO.
// The payload message may differ in size from what the header says.
std::string forgeNet(Connection& conn, const ForgedStep& step) {
  auto* c = static_cast<net_detail::NetConn*>(conn.state);
  const gyreNet_v8_t* api = c->net->api;
  if (!api) return "the network has no plugin interface";
  if (step.payload.size() > c->slotBytes) return "the payload is larger than a slot";
  const int s = static_cast<int>(c->posted % kFifoSlots);
  c->meta[s] = step.meta;
  if (!step.payload.empty()) memcpy(c->slots + s * c->slotBytes, step.payload.data(), step.payload.size());
  struct Message {
    void* data;
    int size;
    void* mh;
    void* req;
  } messages[2] = {{&c->meta[s], static_cast<int>(sizeof(SlotMeta)), c->mhMeta, nullptr},
                   {c->slots + s * c->slotBytes, static_cast<int>(step.payload.size()), c->mhSlots, nullptr}};
  // isend gives no request until the receiver has posted its receive; the
  // honest rank posts them as soon as its call starts.
  // An abort notice is a header alone, as the library sends one.
  const int count = step.meta.flags & kMetaAbort ? 1 : 2;
  const double until = monotonicSeconds() + 5;
  for (int i = 0; i < count; ++i)
    for (Message& m = messages[i]; !m.req;) {
      if (api->isend(c->comm, m.data, m.size, 0, m.mh, &m.req) != ncclSuccess) return "isend failed";
      if (monotonicSeconds() > until) return "the receiver never posted its receive";
    }
  // Sent once both complete, or the receiver failed on the header first.
  for (int i = 0; i < count; ++i)
    for (int done = 0, size = 0; !done && monotonicSeconds() < until;)
      if (api->test(messages[i].req, &done, &size) != ncclSuccess) break;
  c->posted += 1;
  return "";
}

}  // namespace

Connection* ringSendTo(ncclComm_t comm, int peer) {
  if (comm->channels.empty()) return nullptr;
  for (Connection* c : comm->channels[0].sendPtrs)
    if (c->peer == peer) return c;
  return nullptr;
}

Connection* ringRecvFrom(ncclComm_t comm, int peer) {
  if (comm->channels.empty()) return nullptr;
  for (Connection* c : comm->channels[0].recvPtrs)
    if (c->peer == peer) return c;
  return nullptr;
}

std::string forgeAcknowledgement(Connection& in, uint64_t ahead) {
  if (std::string(in.transport->name()) == "NET/IB") return forgeIbAcknowledgement(in, ahead);
  if (!in.sharedCounters) return std::string("no acknowledgement crosses ") + in.transport->name();
  const double until = monotonicSeconds() + kForgeWait_s;
  while (loadAcquire(in.fifo.tail) < kFifoSlots)
    if (monotonicSeconds() > until) return "the sender never filled its FIFO";
  const uint64_t head = loadAcquire(in.fifo.tail) + ahead;
  storeRelease(in.fifo.head, head);
  in.step = head;
  in.transport->wakePeer(in);
  return "";
}

std::string forgeStep(Connection& conn, const ForgedStep& step) {
  if (conn.sharedCounters) return forgeShared(conn, step);
  const std::string name = conn.transport->name();
  if (name == "socket") return forgeSocket(conn, step);
  if (name == "NET/IB") return forgeNet(conn, step);
  return std::string("no forgery for transport ") + conn.transport->name();
}

bool announceFromMemfd(ForgedStep* step, const std::vector<char>& memory, uint64_t address, uint32_t bytes) {
  constexpr size_t kPage = 4096;
  const size_t pages = std::max<size_t>(1, (memory.size() + kPage - 1) / kPage);
  if (step->closeAfter >= 0) close(step->closeAfter);  // an earlier announcement of this step's
  const int fd = memfd_create("lying-peer", MFD_CLOEXEC);
  struct stat st {};
  step->closeAfter = -1;
  if (fd < 0) return false;
  step->closeAfter = fd;
  if (ftruncate(fd, static_cast<off_t>(pages * kPage)) != 0 || fstat(fd, &st) != 0) return false;
  if (!memory.empty() && pwrite(fd, memory.data(), memory.size(), 0) != static_cast<ssize_t>(memory.size()))
    return false;
  PeerAddress a;
  a.fd = fd;
  a.inode = static_cast<uint64_t>(st.st_ino);
  a.pages = static_cast<uint32_t>(pages);
  a.base = 0;
  a.address = address;
  step->meta.bytes = bytes;
  const char* raw = reinterpret_cast<const char*>(&a);
  step->payload.assign(raw, raw + sizeof(a));
  return true;
}

std::string forgeAbortNotice(Connection& conn, uint64_t named) {
  // Shared memory carries a notice as a word beside the FIFO, which the
  // transport's own sendAbortNotice stores (the value is the lie).
  if (conn.sharedCounters) {
    conn.transport->sendAbortNotice(conn, static_cast<int>(named));
    return "";
  }
  ForgedStep notice;
  notice.meta.flags = kMetaAbort;
  notice.meta.count = named;
  return forgeStep(conn, notice);
}

SlotMeta honestBroadcastMeta(size_t count, int root, size_t stepBytes, size_t step) {
  SlotMeta m{};
  m.opCount = 1;  // the communicator's first collective
  const size_t bytes = count * sizeof(int32_t);
  const size_t from = std::min(bytes, step * std::min(stepBytes, bytes));
  m.bytes = static_cast<uint32_t>(std::min(bytes - from, stepBytes));
  m.count = count;
  m.root = metaRootOf(CollKind::Broadcast, root);
  m.coll = static_cast<uint8_t>(CollKind::Broadcast);
  m.datatype = ncclInt32;
  m.redop = ncclSum;
  return m;
}

}  // namespace gyre::test
