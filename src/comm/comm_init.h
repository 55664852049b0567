// Building a communicator: validate the arguments and settings, rendezvous,
// agree on shared parameters, and connect every channel's peers.
#pragma once

#include <vector>

#include "include/gyre.h"

namespace gyre {

ncclResult_t initCommunicator(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                              const ncclConfig_t* config, bool isHost, const char* caller);
// With several ids (ncclCommInitRankScalable) each id's root gathers one
// block of ranks instead of one root gathering all (src/bootstrap/rendezvous.h).
ncclResult_t initCommunicator(ncclComm_t* out, int nranks, const std::vector<ncclUniqueId>& ids, int rank,
                              const ncclConfig_t* config, bool isHost, const char* caller);

// Tears down a communicator; with `abort` in-flight calls are made to fail first.
ncclResult_t destroyCommunicator(ncclComm_t comm, bool abort);
// ncclCommFinalize: waits for queued device work, then refuses new calls.
ncclResult_t finalizeCommunicator(ncclComm_t comm);

}  // namespace gyre
