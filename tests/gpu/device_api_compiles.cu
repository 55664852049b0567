// Source compatibility: the device-side and host-side names of NCCL's
// device API that nccl-tests' device implementations (-D) and NCCL's
// documented examples use, in kernels and host code of this file's own, in
// the shapes those programs use them. Built for every configured SM
// architecture, never launched (the GPU suite and tests/device run the LSA
// parts for real; GIN and multimem calls stop the kernel by design).
// By path: NVIDIA's own nccl.h may sit on the system include path.
#include "include/nccl.h"
#include "include/nccl_device.h"

namespace {

// Reduce every rank's window into every rank's window, the plain way.
template <typename T>
__global__ void lsaAllReduce(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin, size_t recvoffset,
                             size_t count, int root, struct ncclDevComm devComm) {
  (void)root;
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm), devComm.lsaBarrier,
                                         blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed);
  const int first = threadIdx.x + blockDim.x * (devComm.rank + blockIdx.x * devComm.nRanks);
  const int stride = blockDim.x * gridDim.x * devComm.nRanks;
  for (size_t i = first; i < count; i += stride) {
    T v = T(0);
    for (int p = 0; p < devComm.nRanks; ++p) v += static_cast<T*>(ncclGetLsaPointer(sendwin, sendoffset, p))[i];
    for (int p = 0; p < devComm.nRanks; ++p) static_cast<T*>(ncclGetLsaPointer(recvwin, recvoffset, p))[i] = v;
  }
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

// The same through ncclSymPtr and the reduce/copy building blocks, over
// every group kind.
template <typename T>
__global__ void symPtrAllReduce(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin, size_t recvoffset,
                                size_t count, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamTagLsa(), blockIdx.x};
  bar.arrive(ncclCoopCta(), cuda::memory_order_relaxed);
  bar.wait(ncclCoopCta(), cuda::memory_order_acquire);
  ncclSymPtr<T> src{sendwin, sendoffset};
  ncclSymPtr<T> dst(recvwin, recvoffset);
  const size_t part = count / gridDim.x;
  src += blockIdx.x * part;
  dst = dst + blockIdx.x * part;
  ncclTeam lsa = ncclTeamLsa(devComm);
  ncclLsaReduceSumCopy(ncclCoopCta(), src, dst, part, lsa);
  ncclLsaReduceSumCopy(ncclCoopCta(), src, dst, part, devComm);
  ncclLsaReduceSumCopy(ncclCoopCta(), src, lsa, dst, lsa, part);
  ncclLsaReduceSumCopy<T>(ncclCoopCta(), sendwin, sendoffset, recvwin, recvoffset, part, lsa);
  ncclLsaReduceSumCopy<T>(ncclCoopCta(), sendwin, sendoffset, recvwin, recvoffset, part, devComm);

  T* mine = src.localPtr();
  T* scratch = dst.lsaPtr(lsa.rank);
  ncclLsaReduceSum(ncclCoopWarp(), src, scratch, part, lsa);
  ncclLsaReduceSum(ncclCoopWarp(), src, scratch, part, devComm);
  ncclLsaReduceSum<T>(ncclCoopWarp(), sendwin, sendoffset, scratch, part, lsa);
  ncclLsaReduceSum<T>(ncclCoopWarp(), sendwin, sendoffset, scratch, part, devComm);
  ncclLsaCopy(ncclCoopTile<8>(), mine, dst, part, lsa);
  ncclLsaCopy(ncclCoopTile<8>(), mine, dst, part, devComm);
  ncclLsaCopy<T>(ncclCoopThread(), mine, recvwin, recvoffset, part, lsa);
  ncclLsaCopy<T>(ncclCoopThread(), mine, recvwin, recvoffset, part, devComm);

  auto srcAt = [=](int i) -> T* { return src.peerPtr(lsa, i); };
  auto dstAt = [=](int i) -> T* { return dst.lsaPtr(i); };
  ncclLsaReduceSumLsaCopy<T>(ncclCoopLanes(0xffffu), srcAt, lsa.nRanks, dstAt, lsa.nRanks, part);
  ncclLsaReduceLsaCopy<T>(ncclCoopWarpSpan(0, 2, 1), srcAt, lsa.nRanks, dstAt, 1, nccl::utility::OpSum<T>(), part);
  ncclLsaReduceSum<T>(ncclCoopCta(), srcAt, lsa.nRanks, scratch, part);
  ncclLsaCopy<T>(ncclCoopCta(), mine, dstAt, lsa.nRanks, part);
  ncclLocalReduceSum<T>(ncclCoopCta(), srcAt, 1, scratch, part);
  ncclLocalReduceSum(ncclCoopCta(), 2, mine, part / 2, scratch, part / 2);
  ncclLocalCopy<T>(ncclCoopCta(), mine, dstAt, 1, part);
  ncclLocalCopy(ncclCoopCta(), mine, 1, scratch, size_t(0), part);
  ncclLocalReduceSumCopy(ncclCoopCta(), 2, mine, part / 2, 2, scratch, part / 2, part / 2);

  // Pointer facts and arithmetic.
  ncclSymPtr<char> bytes = src;
  ncclSymPtr<T> back = bytes;
  if (back != src || !(back == src) || (dst - 1) - dst != -1 || src.peerPtr(devComm.rank) != mine) __trap();
  back -= 1u;
  back += 1ll;
  (void)src.multimemPtr(devComm.lsaMultimem);
  (void)src.lsaMultimemPtr(devComm);
  (void)ncclGetLsaMultimemPointer(sendwin, sendoffset, devComm);
  (void)ncclGetMultimemPointer(sendwin, sendoffset, devComm.lsaMultimem);
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

// Groups: the erased kind, broadcasts, facts.
__global__ void coops(int* out, ncclDevComm devComm) {
  ncclCoopAny any = ncclCoopCta();
  ncclCoopAny warp{ncclCoopWarp()};
  int v = ncclCoopBcast(ncclCoopCta(), int(threadIdx.x) * 3, 5);
  v += ncclCoopBcast(ncclCoopWarp(), v, 1);
  v += ncclCoopBcast(ncclCoopLanes(0xf0f0f0f0u), v, 2);
  v += ncclCoopBcast(ncclCoopWarpSpan(0, 2, 3), v, 7, false);
  v += ncclCoopBcast(ncclCoopTile<8>(), v, 3);  // a sub-warp tile shuffles over its own lanes
  v += ncclCoopBcast(ncclCoopWarpSpan(0, 1, 14), v, 0);  // the largest span id: named barrier 15
  any.sync();
  warp.sync();
  uint32_t m = ncclCoopGetLaneMask(ncclCoopTile<4>()) ^ ncclCoopGetLaneMask(ncclCoopCta()) ^
               ncclCoopGetLaneMask(ncclCoopLanes(3)) ^ ncclCoopGetLaneMask(ncclCoopWarpSpan(0, 1, 0));
  bool facts = ncclCoopIsThread(ncclCoopThread()) && ncclCoopWithinWarp(ncclCoopCoalesced()) &&
               !ncclCoopIsThread(ncclCoopCoalesced(ncclCoopCta())) && ncclCoopWithinWarp(ncclCoopCoalesced(ncclCoopTile<4>()));
  ncclTeam rail = ncclTeamRail(devComm);
  ncclTeam world = ncclTeamWorld(devComm);
  int peer = ncclTeamRankToTeam(world, rail, 0) + ncclTeamRankToWorld(devComm, rail, 0) +
             ncclTeamRankToLsa(devComm, ncclTeamLsa(devComm), 0) + int(ncclTeamRankIsMember(rail, world, 1)) +
             ncclTeamInnerFactor(world, 1).nRanks + ncclTeamOuterFactor(world, 1).nRanks +
             ncclTeamRankInDifference(world, rail, 0);
  out[threadIdx.x] = v + any.thread_rank() + any.size() + warp.num_threads() + int(m) + int(facts) + peer;
}

// NCCL's low-latency all-to-all: `perPeer` values from every rank to every
// rank per round, with each way of receiving, over two groups and types.
struct Pair {
  double a;
  int b;
};
template <typename T, typename Coop>
__global__ void llAlltoAll(T* out, double* sums, ncclDevComm devComm, ncclLLA2AHandle handle, int perPeer,
                           ncclLsaBarrierHandle pairs) {
  const ncclTeam lsa = ncclTeamLsa(devComm);
  Coop coop;
  ncclLsaBarrierSession<Coop> pair{coop, devComm, ncclTeamInnerFactor(lsa, 2), pairs, blockIdx.x};
  pair.sync(coop, cuda::memory_order_acq_rel);
  ncclLLA2ASession<Coop> s{coop, devComm, lsa, handle, blockIdx.x, lsa.nRanks * perPeer};
  for (int i = coop.thread_rank(); i < perPeer; i += coop.size())
    for (int p = 0; p < lsa.nRanks; ++p) s.send(p, lsa.rank * perPeer + i, T(i + p));
  for (int j = coop.thread_rank(); j < lsa.nRanks * perPeer; j += coop.size()) out[j] = s.template recv<T>(j);
  s.endEpoch(coop);
  for (int i = coop.thread_rank(); i < perPeer; i += coop.size()) s.bcast(lsa.rank * perPeer + i, Pair{double(i), i});
  for (int j = coop.thread_rank(); j < lsa.nRanks * perPeer; j += 4 * coop.size()) {
    Pair got[4];
    s.template recvUnrolled<1, 4>(j, lsa.nRanks * perPeer - j < 4 ? lsa.nRanks * perPeer - j : 4, 1, got);
    out[j] = T(got[0].a + got[0].b);
  }
  s.endEpoch(coop);
  for (int i = coop.thread_rank(); i < perPeer; i += coop.size())
    for (int p = 0; p < lsa.nRanks; ++p) s.send(p, lsa.rank * perPeer + i, T(i));
  for (int i = coop.thread_rank(); i < perPeer; i += coop.size())
    sums[i] = s.template recvReduce<4, T>(i, lsa.nRanks, perPeer, [](T x) { return double(x); },
                                          [](double a, double b) { return a + b; });
  s.endEpoch(coop);
}

// The GIN and multimem shapes of nccl-tests' AllReduce and AlltoAll variants.
template <typename T>
__global__ void refusedShapes(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin, size_t recvoffset,
                              size_t count, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> mm{ncclCoopCta(), devComm, ncclTeamTagLsa(), blockIdx.x, true};
  mm.sync(ncclCoopCta(), cuda::memory_order_relaxed);
  ncclLLA2AHandle none{};
  ncclLLA2ASession<ncclCoopWarp> ll{ncclCoopWarp(), devComm, ncclTeamLsa(devComm), none, 0, 1, true,
                                    devComm.lsaMultimem};
  ll.bcast(0, 1.0f);
  ncclMultimemReduceSum(ncclCoopCta(), ncclSymPtr<T>(sendwin, sendoffset), static_cast<T*>(nullptr), count,
                        devComm.lsaMultimem);
  ncclMultimemCopy(ncclCoopCta(), static_cast<T*>(nullptr), ncclSymPtr<T>(recvwin, recvoffset), count,
                   devComm.lsaMultimem);
  ncclMultimemReduceSumCopy(ncclCoopCta(), ncclSymPtr<T>(sendwin, sendoffset), devComm.lsaMultimem,
                            ncclSymPtr<T>(recvwin, recvoffset), devComm.lsaMultimem, count);

  ncclGin gin{devComm, int(blockIdx.x % (devComm.ginContextCount ? devComm.ginContextCount : 1))};
  uint64_t seen = gin.readSignal(blockIdx.x);
  ncclGinBarrierSession<ncclCoopCta> gbar{ncclCoopCta(), gin, ncclTeamTagWorld(), blockIdx.x};
  gbar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::None);
  ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagWorld(), gin, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_relaxed, ncclGinFenceLevel::Put | ncclGinFenceLevel::Get);
  ncclTeam rail = ncclTeamRail(devComm);
  const size_t size = count * sizeof(T);
  gin.put(rail, 0, recvwin, recvoffset + devComm.rank * size, sendwin, sendoffset, size,
          ncclGin_SignalInc{blockIdx.x});
  gin.waitSignalMeetShadow(ncclCoopThread(), blockIdx.x);
  gin.increaseSignalShadow(blockIdx.x, 1);
  gin.signal(rail, 0, ncclGin_SignalInc{blockIdx.x});
  gin.waitSignal(ncclCoopCta(), blockIdx.x, seen + devComm.nRanks);
  gin.flush(ncclCoopCta());
}

}  // namespace

// The host side those programs use around the kernels.
ncclResult_t deviceApiHostShapes(ncclComm_t comm, void* sendbuff, void* recvbuff, size_t bytes, cudaStream_t stream) {
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  ncclResult_t res = ncclCommQueryProperties(comm, &props);
  if (res != ncclSuccess) return res;
  if (!props.deviceApiSupport || props.nRanks != ncclTeamLsa(comm).nRanks) return ncclInvalidUsage;
  ncclWindow_t sendwin, recvwin;
  ncclCommWindowRegister(comm, sendbuff, bytes, &sendwin, NCCL_WIN_COLL_SYMMETRIC);
  ncclCommWindowRegister(comm, recvbuff, bytes, &recvwin, NCCL_WIN_COLL_SYMMETRIC);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 4;
  const int perPeer = 64;
  ncclLLA2AHandle_t ll;
  ncclDevResourceRequirements_t llReq, barReq;
  ncclLLA2ACreateRequirement(4, ncclLLA2ACalcSlots(props.nRanks * perPeer, sizeof(Pair)), &ll, &llReq);
  ncclLsaBarrierHandle_t pairBarriers;
  ncclLsaBarrierCreateRequirement(ncclTeamInnerFactor(ncclTeamLsa(comm), 2), 4, &pairBarriers, &barReq);
  llReq.next = &barReq;
  reqs.resourceRequirementsList = &llReq;
  if (props.multimemSupport) reqs.lsaMultimem = true;
  if (props.ginType != NCCL_GIN_TYPE_NONE || props.railedGinType != NCCL_GIN_TYPE_NONE) {
    reqs.ginSignalCount = 4 * 2 * ncclTeamRail(comm).nRanks;
    reqs.ginConnectionType = NCCL_GIN_CONNECTION_RAIL;
  }
  ncclDevComm devComm;
  ncclGroupStart();
  ncclDevCommCreate(comm, &reqs, &devComm);
  ncclGroupEnd();
  void* mm = nullptr;
  ncclGetLsaMultimemDevicePointer(sendwin, 0, &mm);
  ncclGetMultimemDevicePointer(sendwin, 0, devComm.lsaMultimem, &mm);
  void* user = nullptr;
  ncclWinGetUserPtr(comm, sendwin, &user);
  int nranks = 0;
  ncclCommCount(comm, &nranks);
  ncclPutSignal(user, 1, ncclFloat, 0, recvwin, 0, 0, 0, 0, comm, stream);
  ncclWaitSignalDesc_t desc = {1, 0, 0, 0};
  ncclWaitSignal(1, &desc, comm, stream);
  int* out = nullptr;
  lsaAllReduce<float><<<4, 256, 0, stream>>>(sendwin, 0, recvwin, 0, bytes / sizeof(float), 0, devComm);
  symPtrAllReduce<half><<<4, 256, 0, stream>>>(sendwin, 0, recvwin, 0, bytes / sizeof(half), devComm);
  symPtrAllReduce<__nv_bfloat16><<<4, 256, 0, stream>>>(sendwin, 0, recvwin, 0, bytes / 2, devComm);
  symPtrAllReduce<double><<<4, 256, 0, stream>>>(sendwin, 0, recvwin, 0, bytes / sizeof(double), devComm);
  symPtrAllReduce<int64_t><<<4, 256, 0, stream>>>(sendwin, 0, recvwin, 0, bytes / sizeof(int64_t), devComm);
  coops<<<1, 64, 0, stream>>>(out, devComm);
  llAlltoAll<float, ncclCoopCta>
      <<<4, 128, 0, stream>>>(static_cast<float*>(recvbuff), nullptr, devComm, ll, perPeer, pairBarriers);
  llAlltoAll<double, ncclCoopWarp>
      <<<4, 32, 0, stream>>>(static_cast<double*>(recvbuff), nullptr, devComm, ll, perPeer, pairBarriers);
  refusedShapes<float><<<4, 256, 0, stream>>>(sendwin, 0, recvwin, 0, bytes / sizeof(float), devComm);
  ncclDevCommDestroy(comm, &devComm);
  ncclCommWindowDeregister(comm, sendwin);
  return ncclCommWindowDeregister(comm, recvwin);
}
