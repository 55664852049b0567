// How a communicator hands itself down to the executors: it makes their views
// of it (HostComm for the host executor, DeviceComm for the device layer) and
// fills them as init learns the facts: the wiring lowering reads (the
// communicator is one), its error state, its observer. This is the one place
// where the communicator's internals meet the executors' interfaces.
#pragma once

#include "include/gyre.h"

struct ncclComm;

namespace gyre {

// When the communicator is created (rank, nranks, isHost and cudaDev set).
void createExecutorViews(ncclComm* comm);

// Once the bootstrap exists: timeouts, the peers' facts, spinning.
void shareBootstrapFacts(ncclComm* comm);

// The collective timeout, in the communicator and in both executors' views
// (gyreCommSetTimeout; at init, GYRE_TIMEOUT).
void setCollTimeout(ncclComm* comm, double seconds);

// Once init's connections exist: the device layer watches them; send/recv
// connections can be made on first use.
void shareInitConnections(ncclComm* comm);

// Whether the communicator's collectives run as device kernels.
bool runsKernels(const ncclComm* comm);

}  // namespace gyre
