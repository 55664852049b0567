#include "forged_steps.h"

#include <sys/socket.h>

#include <cstring>

#include "src/call/coll_kind.h"
#include "src/comm/comm.h"
#include "src/host/wait.h"
#include "src/transport/socket/socket_stream.h"

namespace gyre::test {
namespace {

// Shared memory: the header into the step's line, the payload where a step
// of that many bytes keeps it, then the line's sequence word and tail, and
// the peer woken if it sleeps on tail.
std::string forgeShared(Connection& conn, const ForgedStep& step) {
  Fifo& f = conn.fifo;
  if (!f.hasLines()) return "the shared-memory connection has no slot lines";
  if (step.payload.size() > f.slotBytes) return "the payload is larger than a slot";
  memcpy(f.payload(step.lineStep, step.payload.size()), step.payload.data(), step.payload.size());
  f.lineOf(step.lineStep).meta = step.meta;
  storeRelease(&f.lineOf(step.lineStep).seq, step.lineSeq);
  storeRelease(f.tail, step.lineStep + 1);
  conn.step = step.lineStep + 1;
  conn.transport->wakePeer(conn);
  return "";
}

// Sockets: the header and the payload as one control message, as the
// socket transport frames a step.
std::string forgeSocket(Connection& conn, const ForgedStep& step) {
  auto* s = static_cast<socket_detail::SocketConn*>(conn.state);
  const char* header = reinterpret_cast<const char*>(&step.meta);
  std::vector<char> frame(header, header + sizeof(SlotMeta));
  frame.insert(frame.end(), step.payload.begin(), step.payload.end());
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::send(s->socket.fd(), frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EAGAIN) continue;  // the socket is non-blocking; a small frame fits soon
    if (n <= 0) return std::string("send: ") + strerror(errno);
    done += static_cast<size_t>(n);
  }
  return "";
}

}  // namespace

Connection* ringSendTo(ncclComm_t comm, int peer) {
  if (comm->channels.empty()) return nullptr;
  for (Connection* c : comm->channels[0].sendPtrs)
    if (c->peer == peer) return c;
  return nullptr;
}

std::string forgeStep(Connection& conn, const ForgedStep& step) {
  if (conn.sharedCounters) return forgeShared(conn, step);
  if (std::string(conn.transport->name()) == "socket") return forgeSocket(conn, step);
  return std::string("no forgery for transport ") + conn.transport->name();
}

SlotMeta honestBroadcastMeta(size_t count, int root) {
  SlotMeta m{};
  m.opCount = 1;  // the communicator's first collective
  m.bytes = static_cast<uint32_t>(count * sizeof(int32_t));
  m.count = count;
  m.root = metaRootOf(CollKind::Broadcast, root);
  m.coll = static_cast<uint8_t>(CollKind::Broadcast);
  m.datatype = ncclInt32;
  m.redop = ncclSum;
  return m;
}

}  // namespace gyre::test
