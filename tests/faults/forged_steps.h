// forged_steps.h — what a lying rank puts on the data path it shares with a
// peer, written the way the wire is laid out (src/transport/fifo.h,
// src/transport/socket/socket_stream.h) but with whatever values the test
// chooses. The lying rank is a real member of the communicator: it made its
// connections at init like any rank, and instead of running a collective it
// writes forged steps into its ring send connection to the honest peer, or
// forged acknowledgements into its ring receive connection from it.
// Nothing in the library is hooked: on shared memory the step goes into the
// FIFO both ranks map, on sockets its bytes go straight onto the socket (a
// payload of a data-socket size in pieces onto the data sockets), on IB its
// two messages go through the network's isend.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "include/gyre.h"
#include "src/transport/socket/socket_pieces.h"
#include "src/transport/transport.h"

namespace gyre::test {

struct ForgedStep {
  SlotMeta meta{};
  std::vector<char> payload;  // the bytes that follow the header
  // Shared memory: the step whose line the forgery is written into, and the
  // sequence word stored there (the library stores step + 1). On a socket
  // with data sockets, lineStep is the job number in the pieces' headers
  // (every step of the tests' calls goes in pieces there).
  uint64_t lineStep = 0;
  uint64_t lineSeq = 1;
  // Data sockets: changes the header of the piece for socket i, after it
  // was filled in as an honest sender of this payload fills it.
  std::function<void(int, socket_detail::PieceHeader*)> lieInPiece;
  int closeAfter = -1;  // a descriptor the forgery points at, open until the peer is done
};

// The connection on which `comm` sends to (receives from) `peer` in its
// first ring channel, or null.
Connection* ringSendTo(ncclComm_t comm, int peer);
Connection* ringRecvFrom(ncclComm_t comm, int peer);

// Writes `step` into `conn` as its next step: "" on success, else why not.
// On a socket with data sockets, a header of a size they carry is followed
// by the payload in pieces, each behind its PieceHeader, cut and described
// as an honest sender cuts a payload of that many bytes (socket_pieces.h):
// a payload longer or shorter than the header says then puts more or fewer
// bytes on each data socket than the receiver expects.
std::string forgeStep(Connection& conn, const ForgedStep& step);

// Waits until the sender on the receive connection `in` has filled its
// FIFO (kFifoSlots steps sent, none acknowledged), then acknowledges `ahead`
// steps more than it sent. Shared memory: the FIFO's head counter, which
// the sender takes as free slots, and the sender woken if it sleeps on it.
// IB: this side takes the first kFifoSlots steps' messages (posting their
// receives as the library does), then writes the FIFO entry of the next
// receive with a sequence number `ahead` receives past it.
std::string forgeAcknowledgement(Connection& in, uint64_t ahead);
// The IB part (forged_ib_credits.cc).
std::string forgeIbAcknowledgement(Connection& in, uint64_t ahead);

// Single copy (shared memory): makes `step` an announcement that `bytes`
// of the liar's elements lie at `address` of a new memfd of the liar (its
// first byte at address 0) of `memory.size()` bytes rounded up to pages,
// holding `memory`; the memfd is step->closeAfter (one it held before is
// closed). False if it could not be made.
bool announceFromMemfd(ForgedStep* step, const std::vector<char>& memory, uint64_t address, uint32_t bytes);

// Sends `conn`'s peer an abort notice naming rank `named`. On sockets and
// IB it is a step header flagged kMetaAbort, sent once the peer can take it
// (the library's own notice is best effort, and dropped when the peer has
// not yet posted its receives).
std::string forgeAbortNotice(Connection& conn, uint64_t named);

// What the honest receiver of a Broadcast from `root` of `count` int32
// elements, as the first collective of the communicator, expects in the
// header of step `step` when the call goes in steps of `stepBytes` (a slot).
SlotMeta honestBroadcastMeta(size_t count, int root, size_t stepBytes = SIZE_MAX, size_t step = 0);

}  // namespace gyre::test
