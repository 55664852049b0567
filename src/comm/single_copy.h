// Cross-memory attach between a host communicator's ranks (single_copy.cc).
#pragma once

#include "include/gyre.h"
#include "src/debug/deadline.h"

struct ncclComm;

namespace gyre {

// Sets comm->singleCopy where every rank could read its neighbour's memory
// with process_vm_readv; logs one INFO line saying why not where it tried
// and failed (or GYRE_SINGLE_COPY=off). Needs the rings (and the mesh) connected.
// Also sets comm->shmRings (ringsOnSharedMemory), which the planner reads.
ncclResult_t probeSingleCopy(ncclComm* comm, const Deadline& deadline);
// Whether every ring channel of this host communicator runs over shared memory.
bool ringsOnSharedMemory(const ncclComm* comm);

}  // namespace gyre
