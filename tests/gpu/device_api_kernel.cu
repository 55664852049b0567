// The device API on a real GPU: NRANKS ranks of one process share GPU 0
// (ncclCommInitAll with a repeated device), register a window each, create
// a device communicator with one LSA barrier per block, and launch a kernel
// per rank, all running at once. In each round every block writes its slice
// of this rank's window, meets the peers at its LSA barrier (release and
// acquire), reads every peer's slice through ncclGetLsaPointer and counts
// words that are not what the peer wrote, and meets them again before the
// next round's writes. Then the LL all-to-all (ncclLLA2ASession): two
// launches of kLLRounds rounds in which every rank sends kPerPeer values to
// every rank and checks what it receives. Then one-sided puts with signals
// between all pairs. Exit 0 when nothing was wrong; 1 with a message
// otherwise.
//
//   device_api_kernel [NRANKS=2]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

// By path: NVIDIA's own nccl.h may sit on the system include path.
#include "include/nccl.h"
#include "include/nccl_device.h"

namespace {

constexpr int kBlocks = 4;
constexpr int kThreads = 256;
constexpr int kRounds = 64;
constexpr size_t kWordsPerBlock = 4099;  // prime: blocks' slices are not aligned alike

__host__ __device__ uint32_t pattern(int rank, int round, size_t i) {
  uint64_t x = (uint64_t(rank) << 48) ^ (uint64_t(round) << 32) ^ i;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return uint32_t(x ^ (x >> 31));
}

__global__ void lsaRounds(ncclDevComm dev, ncclWindow_t win, unsigned long long* wrong) {
  const size_t first = size_t(blockIdx.x) * kWordsPerBlock;
  unsigned long long bad = 0;
  for (int round = 0; round < kRounds; ++round) {
    uint32_t* mine = static_cast<uint32_t*>(ncclGetLocalPointer(win, 0));
    for (size_t i = threadIdx.x; i < kWordsPerBlock; i += blockDim.x)
      mine[first + i] = pattern(dev.rank, round, first + i);
    ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev, ncclTeamLsa(dev), dev.lsaBarrier, blockIdx.x};
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (int p = 0; p < dev.lsaSize; ++p) {
      const uint32_t* theirs = static_cast<const uint32_t*>(ncclGetLsaPointer(win, 0, p));
      const int world = ncclTeamRankToWorld(dev, ncclTeamLsa(dev), p);
      for (size_t i = threadIdx.x; i < kWordsPerBlock; i += blockDim.x)
        bad += theirs[first + i] != pattern(world, round, first + i);
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  }
  if (bad) atomicAdd(wrong, bad);
}

constexpr int kPerPeer = 37;  // prime
constexpr int kLLRounds = 16;

__host__ __device__ uint64_t llValue(int from, int to, int block, int round, int i) {
  return (uint64_t(pattern(from, round, size_t(i) * 64 + block)) << 32) | pattern(to + 1000, round, size_t(i));
}

__global__ void llRounds(ncclDevComm dev, ncclLLA2AHandle handle, int launch, unsigned long long* wrong) {
  const ncclTeam lsa = ncclTeamLsa(dev);
  const int b = blockIdx.x;
  unsigned long long bad = 0;
  ncclLLA2ASession<ncclCoopCta> s{ncclCoopCta(), dev, lsa, handle, blockIdx.x, lsa.nRanks * kPerPeer};
  for (int k = 0; k < kLLRounds; ++k) {
    const int round = launch * kLLRounds + k;
    for (int i = threadIdx.x; i < kPerPeer; i += blockDim.x)
      for (int p = 0; p < lsa.nRanks; ++p) s.send(p, lsa.rank * kPerPeer + i, llValue(lsa.rank, p, b, round, i));
    for (int j = threadIdx.x; j < lsa.nRanks * kPerPeer; j += blockDim.x)
      bad += s.recv<uint64_t>(j) != llValue(j / kPerPeer, lsa.rank, b, round, j % kPerPeer);
    s.endEpoch(ncclCoopCta());
  }
  if (bad) atomicAdd(wrong, bad);
}

#define CHECK_OK(call, what)                                                        \
  do {                                                                              \
    if (!(call)) {                                                                  \
      fprintf(stderr, "rank %d: %s failed: %s\n", r, what, ncclGetLastError(nullptr)); \
      failed[r] = 1;                                                                \
      return;                                                                       \
    }                                                                               \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 2;
  std::vector<int> devs(n, 0);
  std::vector<ncclComm_t> comms(n);
  if (ncclCommInitAll(comms.data(), n, devs.data()) != ncclSuccess) {
    fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  const size_t bytes = kBlocks * kWordsPerBlock * sizeof(uint32_t);
  std::vector<int> failed(n, 0);
  std::vector<unsigned long long> wrongWords(n, 0), wrongLL(n, 0), wrongPuts(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cudaSetDevice(0);
      cudaStream_t stream;
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      void* buff = nullptr;
      void* inbox = nullptr;
      CHECK_OK(ncclMemAlloc(&buff, bytes) == ncclSuccess, "ncclMemAlloc");
      CHECK_OK(ncclMemAlloc(&inbox, bytes * n) == ncclSuccess, "ncclMemAlloc");
      ncclWindow_t win, inboxWin;
      CHECK_OK(ncclCommWindowRegister(comms[r], buff, bytes, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
               "ncclCommWindowRegister");
      CHECK_OK(ncclCommWindowRegister(comms[r], inbox, bytes * n, &inboxWin, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
               "ncclCommWindowRegister");
      ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
      reqs.lsaBarrierCount = kBlocks;
      ncclLLA2AHandle ll;
      ncclDevResourceRequirements_t llReq;
      CHECK_OK(ncclLLA2ACreateRequirement(kBlocks, ncclLLA2ACalcSlots(n * kPerPeer, 8), &ll, &llReq) == ncclSuccess,
               "ncclLLA2ACreateRequirement");
      reqs.resourceRequirementsList = &llReq;
      ncclDevComm dev;
      CHECK_OK(ncclDevCommCreate(comms[r], &reqs, &dev) == ncclSuccess, "ncclDevCommCreate");
      unsigned long long* wrong = nullptr;
      cudaMalloc(&wrong, sizeof(*wrong));
      cudaMemsetAsync(wrong, 0, sizeof(*wrong), stream);
      // Each launch's own status: cudaGetLastError after <<<>>> would also
      // report an earlier call's non-sticky error as a failed launch.
      void* lsaArgs[] = {&dev, &win, &wrong};
      CHECK_OK(cudaLaunchKernel(reinterpret_cast<const void*>(&lsaRounds), dim3(kBlocks), dim3(kThreads), lsaArgs, 0,
                                stream) == cudaSuccess, "kernel launch");
      cudaMemcpyAsync(&wrongWords[r], wrong, sizeof(*wrong), cudaMemcpyDeviceToHost, stream);
      CHECK_OK(cudaStreamSynchronize(stream) == cudaSuccess, "the kernel");
      cudaMemsetAsync(wrong, 0, sizeof(*wrong), stream);
      for (int launch = 0; launch < 2; ++launch) {
        void* llArgs[] = {&dev, &ll, &launch, &wrong};
        CHECK_OK(cudaLaunchKernel(reinterpret_cast<const void*>(&llRounds), dim3(kBlocks), dim3(kThreads), llArgs, 0,
                                  stream) == cudaSuccess, "LL kernel launch");
      }
      cudaMemcpyAsync(&wrongLL[r], wrong, sizeof(*wrong), cudaMemcpyDeviceToHost, stream);
      CHECK_OK(cudaStreamSynchronize(stream) == cudaSuccess, "the LL all-to-all kernels");
      // One-sided: this rank's window (the last round's words) into block r
      // of every peer's inbox, with a signal; then wait for every peer's.
      for (int p = 0; p < n; ++p)
        CHECK_OK(ncclPutSignal(buff, bytes / 4, ncclUint32, p, inboxWin, bytes * r, 0, 0, 0, comms[r], stream) ==
                     ncclSuccess, "ncclPutSignal");
      std::vector<ncclWaitSignalDesc_t> descs;
      for (int p = 0; p < n; ++p) descs.push_back({1, p, 0, 0});
      CHECK_OK(ncclWaitSignal(n, descs.data(), comms[r], stream) == ncclSuccess, "ncclWaitSignal");
      std::vector<uint32_t> got(bytes / 4 * n);
      cudaMemcpyAsync(got.data(), inbox, bytes * n, cudaMemcpyDeviceToHost, stream);
      CHECK_OK(cudaStreamSynchronize(stream) == cudaSuccess, "the one-sided operations");
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < bytes / 4; ++i) wrongPuts[r] += got[p * (bytes / 4) + i] != pattern(p, kRounds - 1, i);
      CHECK_OK(ncclDevCommDestroy(comms[r], &dev) == ncclSuccess, "ncclDevCommDestroy");
      CHECK_OK(ncclCommWindowDeregister(comms[r], win) == ncclSuccess, "ncclCommWindowDeregister");
      CHECK_OK(ncclCommWindowDeregister(comms[r], inboxWin) == ncclSuccess, "ncclCommWindowDeregister");
      cudaFree(wrong);
      ncclMemFree(buff);
      ncclMemFree(inbox);
      cudaStreamDestroy(stream);
    });
  for (auto& t : threads) t.join();
  int status = 0;
  for (int r = 0; r < n; ++r) {
    if (failed[r] || wrongWords[r] || wrongLL[r] || wrongPuts[r]) status = 1;
    printf("rank %d of %d: %llu wrong words read through LSA pointers, %llu wrong LL all-to-all values, %llu wrong "
           "words put%s\n", r, n, wrongWords[r], wrongLL[r], wrongPuts[r], failed[r] ? " (a call failed)" : "");
  }
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  printf("%s\n", status == 0 ? "device API kernel: OK" : "device API kernel: FAILED");
  return status;
}
