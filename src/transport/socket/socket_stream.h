// The executor's side of a socket connection: the control socket streams
// [SlotMeta][payload] messages from the sender's FIFO into the receiver's. With
// data sockets (socket_data_path.h) a large payload leaves the message and
// goes in pieces through the helpers; the header still goes first on the
// control socket, so abort notices and mismatch checks work as with one socket.
//
// Steps pass three marks on each side: `sent`/`recvd` (the header, and a small
// payload, went through the control socket), then head (send) or tail (recv)
// once the helpers have moved the rest. Both move in step order.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/debug/error.h"
#include "src/transport/socket/socket_data_path.h"
#include "src/transport/transport.h"

namespace gyre::socket_detail {

struct SocketConn {
  Socket socket;  // the control socket
  std::vector<char> slots;
  SlotMeta meta[kFifoSlots]{};
  uint64_t tail = 0;
  uint64_t head = 0;
  uint64_t sent = 0;             // send: steps whose control message went out
  uint64_t recvd = 0;            // recv: steps whose control message arrived
  uint64_t stepJob[kFifoSlots]{};  // per slot: 1 + its DataPath job, 0 if it came inline
  size_t partialBytes = 0;       // send: bytes of the current control message already sent
  SlotMeta incoming{};           // recv: header of the message being received
  size_t incomingBytes = 0;      // recv: bytes of header+payload received so far
  char* incomingDst = nullptr;   // recv: the user buffer its payload goes to (null: the slot)
  bool controlClosed = false;    // recv: the peer closed the control socket at a message boundary
  // recv: the rank an abort notice from the peer blamed (-1: none yet). The
  // notice is the peer's last message; it is reported again on every later
  // pass, while steps already on the helpers still complete.
  int noticeCulprit = -1;
  // recv: bytes read from the control socket ahead of the message being
  // received, so a header and a small payload cost one recv() between them.
  std::vector<char> ahead;
  size_t aheadPos = 0, aheadEnd = 0;
  std::string what;              // "socket to rank 3" for error messages
  int rank = -1;                 // this rank
  int nranks = 0;                // the communicator's size (0: unknown), to check abort notices
  PayloadPointers pointers;      // Connection::pointers points here
  std::unique_ptr<DataPath> data;  // null with one socket; declared last so its helpers stop first

  bool split(uint32_t bytes) const { return data && bytes >= kSplitBytes; }
  bool stepDone(uint64_t step) const {
    const uint64_t j = stepJob[step % kFifoSlots];
    return j == 0 || data->jobDone(j - 1);
  }
};

// Sends as many control messages as the socket takes right now, then
// publishes the steps that have wholly left.
ncclResult_t progressSend(SocketConn* s, Connection& conn, int* culprit);

// Publishes, in order, the received steps whose pieces have all arrived.
void publishReceived(SocketConn* s, Connection& conn);

// Claims the next slot for the message whose header is in s->incoming.
ncclResult_t claimSlot(SocketConn* s, Connection& conn);

ncclResult_t progressRecv(SocketConn* s, Connection& conn, int* culprit);

// Whether the payload of the message in s->incoming (none of it read yet)
// stays in the kernel for now, because the executor may still offer where it
// goes (PayloadPointers). It is read into the slot anyway once the executor
// has consumed every earlier step (head == recvd) without an offer: a step
// it reduces from the slot, or a later call's. Without this, a rank that woke
// to several waiting steps read them all into slots before its lanes could
// offer anything (4 ranks on 2 cores).
bool payloadAwaitsOffer(const SocketConn* s, const Connection& conn);

// Reads ahead of the message this much at most (a header and a payload that
// fits here arrive in one system call; a larger payload goes straight to its slot).
constexpr size_t kReadAheadBytes = 4096;

// recv() through s->ahead: what was read ahead first, then one recv() into
// s->ahead for a small request or straight into dst for a large one. Returns
// as recv() does (0: the peer closed, -1 with errno).
// *drained (false at the start of each progress pass) is set when a recv()
// comes back short of what it asked for: the kernel had nothing more queued,
// so later calls in the same pass say EAGAIN instead of paying a recv() that
// finds nothing (the next pass reads what arrived since).
ssize_t readControl(SocketConn* s, char* dst, size_t want, bool* drained);

}  // namespace gyre::socket_detail
