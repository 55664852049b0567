// The rendezvous: one root gathers every rank's PeerInfo and sends back the
// full table with a fresh random session secret. The root runs as a thread in
// the process that called ncclGetUniqueId, or in rank 0 when NCCL_COMM_ID
// fixes its address. With several ids (ncclCommInitRankScalable) each id's
// root gathers one block of ranks (root_blocks.h), roots 1.. hand their blocks
// to root 0, and every root sends root 0's table to its own ranks: no root
// accepts more than its block (plus, at root 0, one connection per root).
#pragma once

#include <atomic>
#include <thread>
#include <vector>

#include "src/bootstrap/secure/protection.h"
#include "src/bootstrap/socket.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"

namespace gyre {

// Serves one rendezvous on `listener` until every rank (of its block) has
// joined or `timeoutSeconds` passes; in the latter case it tells the ranks
// that did join which ranks (or roots) are missing. Hellos without the id's secret are refused and logged.
// `secretRandom`: the id's secret came from ncclGetUniqueId (not NCCL_COMM_ID),
// so it keys encrypted connections (secure/protection.h).
void serveRendezvous(Socket listener, uint64_t secret, double timeoutSeconds, bool secretRandom = true);

// Starts a root on the interface chosen by NCCL_SOCKET_IFNAME (for ncclGetUniqueId).
ncclResult_t startDetachedRoot(UniqueIdContents* contents);

// Starts the root for a fixed NCCL_COMM_ID address; the caller joins *thread.
ncclResult_t startFixedRoot(const UniqueIdContents& contents, std::thread* thread);

// Rank side: sends this rank's info and receives everyone's and the session
// secret that the communicator's later connections prove.
// Reaching the root is bounded by `connectDeadline` (GYRE_INIT_TIMEOUT); the
// answer may take until `deadline`, a little later, so that the root's own
// "rank K did not join" message arrives before this rank gives up.
// With several ids the rank reports to ids[rootOfRank(rank)].
ncclResult_t joinRendezvous(const std::vector<UniqueIdContents>& ids, int rank, int nranks, const PeerInfo& self,
                            const Deadline& connectDeadline, const Deadline& deadline,
                            const std::atomic<bool>* abort, std::vector<PeerInfo>* peers,
                            LinkSecret* session);

}  // namespace gyre
