// Cross-memory attach between a host communicator's ranks (single_copy.cc).
#pragma once

#include "include/gyre.h"
#include "src/debug/deadline.h"

struct ncclComm;

namespace gyre {

// Sets comm->singleCopy where every rank could read its neighbour's memory
// with process_vm_readv; logs one INFO line saying why not where it tried
// and failed (or GYRE_SINGLE_COPY=off). Needs the rings (and the mesh) connected.
// Reads comm->shmRings, so runs after it is set.
ncclResult_t probeSingleCopy(ncclComm* comm, const Deadline& deadline);

}  // namespace gyre
