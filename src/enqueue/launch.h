// Turning a batch of calls into lanes and running them.
#pragma once

#include <vector>

#include "src/enqueue/enqueue.h"

namespace gyre {

ncclResult_t launchCalls(std::vector<PendingCall>& calls);

// Records an argument error raised while a group is open (see group.cc).
void noteGroupError(ncclResult_t r);

}  // namespace gyre
