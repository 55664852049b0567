// The state of one net-transport connection (net_transport.h) and the steps
// of its set-up, shared by the transport and its handshake driver.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "src/bootstrap/socket.h"
#include "src/debug/deadline.h"
#include "src/transport/fifo.h"
#include "src/transport/net/network.h"

namespace gyre::net_detail {

struct NetConn {
  const Network* net = nullptr;
  int dev = 0;
  int rank = -1;
  int nranks = 0;  // the communicator's size, to check abort notices
  int peer = -1;
  bool isSend = false;
  std::string what;  // "NET/IB/0 to rank 3 (host)" for error messages

  // Set-up: the receiver's listen handle travels over `control`; it stays
  // open for the final handshake of close (net_close.cc).
  Socket control;
  char handle[GYRE_NET_HANDLE_MAXSIZE]{};
  size_t handleBytes = 0;  // send: bytes of the handle received so far
  void* listenComm = nullptr;
  void* comm = nullptr;  // sendComm or recvComm once connected
  bool ready = false;
  ncclResult_t setupError = ncclSuccess;
  std::string setupText;
  Deadline deadline = Deadline::afterSeconds(0);
  const std::atomic<bool>* abort = nullptr;

  // The FIFO, in this process's memory and registered with the network.
  char* slots = nullptr;
  size_t slotBytes = 0;
  alignas(64) SlotMeta meta[kFifoSlots]{};
  uint64_t tail = 0;
  uint64_t head = 0;
  void* mhSlots = nullptr;
  void* mhMeta = nullptr;

  // Steps whose two messages were handed to the network (send: isend'ed;
  // recv: irecv'ed). `half`: the first (SlotMeta) message of step `posted`
  // is out and its payload message is not yet.
  uint64_t posted = 0;
  bool half = false;
  void* metaReq[kFifoSlots]{};
  void* dataReq[kFifoSlots]{};

  std::string failure;     // a send failure, reported again on every pass
  int noticeCulprit = -1;  // recv: the culprit of the peer's abort notice
  uint64_t noticeNamed = 0;  // recv: the rank that notice named, as it came off the wire
  bool noticeSent = false;

  // Close: the receiver tells the sender how many messages it has receives
  // posted for; the sender sends empty ones up to that count, so neither end
  // hands the network a comm with requests in flight.
  bool closing = false;
  uint64_t peerMessages = 0;      // send: the receiver's count, once it arrived
  size_t peerMessagesBytes = 0;   // send: bytes of that count received so far
  bool peerGone = false;          // send: the control socket closed; nothing more can match
  bool networkFailed = false;     // a request failed: the peer can complete nothing more
  bool abortedAtClose = false;    // closed by ncclCommAbort
  bool deferred = false;          // its communicator is gone; the reaper finishes it
  Deadline closeDeadline = Deadline::afterSeconds(0);
  Deadline inPlaceDeadline = Deadline::afterSeconds(0);  // then the reaper takes over

  // Messages handed to the network: two per step, one more while half sent.
  uint64_t messagesPosted() const { return 2 * posted + (half ? 1 : 0); }
};

// One non-blocking step of `c`'s handshake; sets c->ready when it is done.
ncclResult_t handshakeStep(NetConn* c);

// Pending handshakes of this process (connections not yet ready).
void addPending(NetConn* c);
void removePending(NetConn* c);
// Drives every pending handshake one step; failures stay with their connection.
void drivePending();

// Close (net_close.cc). beginClose() does what needs no peer: the receiver
// sends its count of posted receives. finishClose() then drives every
// closing connection of the process until `c`'s requests are all done, and
// releases `c` (the network's comm, the FIFO, `c` itself); if the peer has
// not closed within a second, a reaper thread does that later, within
// GYRE_TIMEOUT. Either way the caller no longer owns `c`.
void beginClose(NetConn* c);
void finishClose(NetConn* c);

// The text of the network's last failure: gyre's own message for a built-in
// network, the plugin's last WARN line for an external one.
std::string netFailureText(const Network* net);

}  // namespace gyre::net_detail
