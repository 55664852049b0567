// A kernel written for NCCL's GIN device API, in the shapes nccl-tests'
// AlltoAll variants use, compiles against gyre's headers (built, never
// launched: gyre refuses GIN at ncclDevCommCreate, and a GIN call traps).
// By path: NVIDIA's own nccl.h may sit on the system include path.
#include "include/nccl.h"
#include "include/nccl_device.h"

__global__ void ginAlltoAllShape(ncclWindow_t sendwin, ncclWindow_t recvwin, size_t size, ncclDevComm devComm) {
  ncclGin gin{devComm, 0};
  uint64_t signalValue = gin.readSignal(0u);
  ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagWorld(), gin, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed, ncclGinFenceLevel::Relaxed);
  ncclTeam world = ncclTeamWorld(devComm);
  for (int r = threadIdx.x; r < devComm.nRanks; r += blockDim.x)
    gin.put(world, r, recvwin, devComm.rank * size, sendwin, r * size, size, ncclGin_SignalInc{0u});
  gin.waitSignal(ncclCoopCta(), 0u, signalValue + devComm.nRanks);
  gin.flush(ncclCoopCta());
}

void launchGinAlltoAllShape(ncclWindow_t s, ncclWindow_t r, size_t size, ncclDevComm d, cudaStream_t stream) {
  ginAlltoAllShape<<<1, 32, 0, stream>>>(s, r, size, d);
}
