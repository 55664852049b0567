// The direct executor for ranks of one process sharing one GPU
// (direct_calls.h says when it runs): the ranks meet in a DirectClique
// (direct_clique.h) and order their streams by events.
#pragma once

#include <vector>

#include "include/gyre.h"
#include "src/debug/deadline.h"
#include "src/device/device_comm.h"

namespace gyre {

// Whether every rank of the communicator is in this process, on this GPU.
bool allRanksInThisProcessOnThisGpu(const DeviceComm* comm);

// At init (comm->direct made): the clique and this rank's events.
ncclResult_t setupInProcess(DeviceComm* comm, const Deadline& deadline);

// Runs direct calls of communicators set up by setupInProcess, in group order.
ncclResult_t launchInProcess(const std::vector<const DeviceRequest*>& calls);

// Destroy/abort, after this rank's calls drained: lets go of the clique.
void releaseInProcess(DeviceComm* comm);

}  // namespace gyre
