// The INFO line that says whether a device communicator's network traffic
// reaches its GPU buffers directly (dma-buf registration) or is staged
// through host memory, and why (src/transport/net/gpu_direct.h).
#pragma once

struct ncclComm;

namespace gyre {

// Logs the choice once, at init, for a device communicator with network edges.
void logNetGpuDirect(const ncclComm* comm);

}  // namespace gyre
