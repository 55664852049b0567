// Connecting a communicator's channels at init: the rings the topology search
// ordered (comm->topology->rings) and the two trees of the double binary
// tree. Every rank first starts all its outgoing connections, then accepts
// the incoming ones, so no pair waits on the other's order.
#pragma once

#include "include/gyre.h"
#include "src/debug/deadline.h"

struct ncclComm;

namespace gyre {

// One ring channel per channel of the ring plan, each with its own
// connections (and connection tags).
ncclResult_t connectRings(ncclComm* comm, const Deadline& deadline);
ncclResult_t connectTrees(ncclComm* comm, const Deadline& deadline);
// Partners rank ^ 2^k for every round, when nranks is a power of two >= 4.
ncclResult_t connectDoubling(ncclComm* comm, const Deadline& deadline);
// The Direct algorithms' connections to and from every rank (CommMesh), where
// directAvailable() says they can run; nothing elsewhere.
ncclResult_t connectMesh(ncclComm* comm, const Deadline& deadline);
// Ends handshakes that wait on the peers' connectRecv (p2p), once every
// connection above has been made.
ncclResult_t finishConnections(ncclComm* comm);
// Whether every ring channel of this host communicator runs over shared
// memory (comm->shmRings, which the planner and the single-copy probe read).
bool ringsOnSharedMemory(const ncclComm* comm);

}  // namespace gyre
