// From a validated call to its execution: plan it, build the schedule, run it
// on the communicator's executor.
#pragma once

#include "src/host/executor.h"

namespace gyre {

ncclResult_t enqueueCollective(ncclComm* comm, CollCall call);

}  // namespace gyre
