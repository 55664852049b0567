// The transport interface. A transport sets up connections whose data path is
// a Fifo (src/transport/fifo.h); the executor never calls the transport per
// element. Transports that need a helper to move bytes (sockets, later the
// network) do it in progress(), which the executor calls only while waiting.
//
// Adding a transport: one folder under src/transport/ and one line in
// src/transport/registry.cc.
#pragma once

#include <poll.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/bootstrap/wire.h"
#include "src/debug/deadline.h"
#include "src/transport/fifo.h"

namespace gyre {

class Bootstrap;
class Transport;

// Payloads by pointer, for transports that move bytes with system calls
// (sockets: Connection::pointers). A step's payload may leave from the
// user's buffer, and land in it, instead of the FIFO slot: the executor's
// copy into the slot (sender) and out of it (receiver) go away, so over TCP
// a byte is copied twice (into and out of the kernel) instead of four times.
// Payloads below kByPointerMinBytes keep using the slot: a copy that small
// costs less than the bookkeeping, and the socket's read-ahead already takes
// header and payload in one recv().
constexpr uint32_t kByPointerMinBytes = 4096;
struct PayloadPointers {
  // send, per slot: where the transport sends the step's payload from (null:
  // the slot). The executor keeps that memory unchanged until head passes
  // the step (src/host/user_payloads.h).
  const char* sendFrom[kFifoSlots] = {};
  // recv: a destination the executor offers for step `offerStep` while it
  // waits on that step and would copy its payload there. The transport takes
  // it only if no byte of that payload has been read yet and the payload has
  // exactly `offerBytes`.
  uint64_t offerStep = UINT64_MAX;
  char* offerDst = nullptr;
  uint32_t offerBytes = 0;
  // recv, per slot: where the received payload is (null: the slot).
  char* recvAt[kFifoSlots] = {};
};

// One direction of one connection, as the executor and the progress engine see it.
struct Connection {
  Fifo fifo;
  int peer = -1;                 // peer rank
  bool isSend = false;
  bool needsProgress = false;    // true: transport->progress() must run while waiting
  Transport* transport = nullptr;
  void* state = nullptr;         // owned by the transport
  uint64_t step = 0;             // executor-side count of steps posted (send) or consumed (recv)
  uint64_t callSeq = 0;          // send/recv calls made on this connection (their SlotMeta sequence number)
  // A sender's last load of head: head only grows, so while it shows a free
  // slot the line the peer keeps writing need not be loaded again.
  mutable uint64_t seenHead = 0;
  // How far ahead of head the sender's next step may be (src/host/wait.h:
  // kLineSlots for a step that fits its slot line, else kFifoSlots), as of
  // its last check: a sender asleep on head waits for that much room.
  mutable uint64_t sendDepth = kFifoSlots;
  // Set by the transport when the peer closed its end. Not an error by itself:
  // a peer that finished the collective may close before this rank has
  // consumed the last data it sent. It becomes one when this rank waits for
  // data that can no longer arrive. Read and set through peerClosedOf and
  // markPeerClosed: a device communicator's p2p connections are progressed
  // by two threads (its kernel watchdog and the host executor of its staged
  // calls).
  bool peerClosed = false;
  // How the transport learned of the close when that says more than a closed
  // socket (a network's completion error on the link); empty otherwise. A
  // peer whose link failed is not one that left, and the report says so.
  std::string closedHow;
  // The FIFO's counters live in memory that both ranks map (shared memory).
  // The executor then sleeps on them (Transport::sleepWord) instead of in
  // poll(), wakes the peer after moving them (Transport::wakePeer), and runs
  // progress() only before it sleeps, to learn whether the peer is alive or
  // has sent an abort notice.
  bool sharedCounters = false;
  // Set (and owned) by a transport that honours payloads by pointer (see
  // PayloadPointers); null for the others.
  PayloadPointers* pointers = nullptr;
};

// Connection::peerClosed as an atomic (see there).
inline bool peerClosedOf(const Connection& c) { return __atomic_load_n(&c.peerClosed, __ATOMIC_ACQUIRE); }
inline void markPeerClosed(Connection& c) { __atomic_store_n(&c.peerClosed, true, __ATOMIC_RELEASE); }

// Where a rank waiting on a sharedCounters connection can sleep: the FIFO
// counter its peer advances (tail for a receiver, head for a sender; a futex
// on its low 32 bits) and the count of sleepers that the peer reads after
// advancing it, to skip the wake-up system call when nobody sleeps.
struct SleepWord {
  const uint64_t* counter = nullptr;
  uint32_t* sleepers = nullptr;
};

// What a transport may use while connecting.
struct ConnectContext {
  Bootstrap* bootstrap;
  int rank;
  int channel;
  size_t slotBytes;
  Deadline deadline;
  const std::atomic<bool>* abort;
  // NUMA node helper threads of this connection bind to (-1: leave them
  // unbound): the node nearest the rank's device, or its own for host memory.
  int helperNuma = -1;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // What carries `conn`, as NCCL's INFO lines say it: "SHM", "P2P/IPC",
  // "NET/Socket/0", "NET/IB/1".
  virtual std::string via(const Connection& conn) const {
    (void)conn;
    return name();
  }
  // Whether this transport can link `self` and `peer` (checked on both sides alike).
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  // Every rank first calls connectSend for all its send connections, then
  // connectRecv, so transports may complete a handshake across the two.
  virtual ncclResult_t connectSend(const ConnectContext& ctx, int peer, Connection* out) = 0;
  virtual ncclResult_t connectRecv(const ConnectContext& ctx, int peer, Connection* out) = 0;
  // Called on every connection once every rank has run all its connectRecv
  // calls: a handshake whose answer comes from the peer's connectRecv ends here.
  virtual ncclResult_t finishConnect(Connection& conn) {
    (void)conn;
    return ncclSuccess;
  }
  // Moves what it can without blocking. Errors name the peer; *culprit gets
  // the rank held responsible (the peer, or the rank a peer reported dead).
  virtual ncclResult_t progress(Connection& conn, int* culprit) = 0;
  // The descriptor and events to wait on when progress() could do nothing.
  virtual bool pollRequest(const Connection& conn, pollfd* out) const = 0;
  // Best effort, non-blocking: tells the peer this rank has failed because of
  // `culprit`, so ranks further along learn who died. Called on send
  // connections, and on sharedCounters connections in both directions.
  virtual void sendAbortNotice(Connection& conn, int culprit) = 0;
  // Called on every connection of a communicator before any is closed:
  // starts what closing needs of the peer without waiting for it, so ranks
  // closing their connections in different orders never wait on each other.
  virtual void beginClose(Connection& conn) { (void)conn; }
  virtual void close(Connection& conn) = 0;

  // Only for connections with sharedCounters (the defaults do nothing).
  // The word to sleep on while this side waits for the peer.
  virtual bool sleepWord(const Connection& conn, SleepWord* out) const {
    (void)conn;
    (void)out;
    return false;
  }
  // Called after the executor may have moved this side's counter (conn.step):
  // wakes the peer if it sleeps on it. Cheap when nothing moved.
  virtual void wakePeer(Connection& conn) { (void)conn; }
};

// Transports in preference order (socket is last: it always works).
std::vector<Transport*> registeredTransports();
// The first registered transport that can link the two ranks.
Transport* pickTransport(const PeerInfo& self, const PeerInfo& peer);

}  // namespace gyre
