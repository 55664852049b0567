// Windows and NCCL's device API for LSA teams (nccl_device.h) on the fake
// CUDA runtime. The device functions are __host__ __device__, so a "kernel"
// here is one host thread per rank and block calling the same ncclGetLsaPointer and
// ncclLsaBarrierSession code a GPU kernel calls, against the fake's device
// memory (which other processes map through the fake's CUDA IPC). Each case
// checks bytes read through peers' pointers against an independent
// reference of what each peer wrote, over many rounds, so a barrier that
// let a rank read before its peers wrote, or write before they read, fails.
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "coll_common.h"
#include "include/nccl_device.h"
#include "src/comm/comm.h"
#include "src/device/device_comm.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"

namespace {

using namespace gyre::test;

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

RankOptions apiOptions(double timeout = 120) {
  RankOptions o;
  o.timeout_s = timeout;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "20"}, {"GYRE_INIT_TIMEOUT", "20"}};
  return o;
}

// What rank `r` writes at word i in round `round`: a hash, so every
// (rank, round, word) differs.
uint32_t pattern(int r, int round, size_t i) {
  uint64_t x = (uint64_t(r) << 48) ^ (uint64_t(round) << 32) ^ i;
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return uint32_t(x ^ (x >> 31));
}

// Mappings of fake device memory in this process: its own blocks and the
// peers' blocks it opened by (fake) CUDA IPC.
int fakeDeviceMappings() {
  FILE* f = fopen("/proc/self/maps", "r");
  if (!f) return -1;
  char line[512];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, "gyre-fake-device")) ++n;
  fclose(f);
  return n;
}

constexpr size_t kWords = 1009;  // prime
constexpr int kRounds = 40;

// The emulated kernel, one host thread per block: each round every block
// writes its slice of its rank's window, meets the same block of every peer
// at its own LSA barrier (index = block), reads that slice of every peer
// through their LSA pointers, and meets them again before the next round's
// writes. A fresh barrier session per round, as a kernel launch per round
// would. "" when every word read was the one its writer wrote.
constexpr int kBlocks = 2;

std::string lsaBlock(const ncclDevComm& dev, ncclWindow_t win, int block) {
  const size_t first = kWords * block / kBlocks, last = kWords * (block + 1) / kBlocks;
  constexpr uint64_t kTimeout = 20ull * 1000 * 1000 * 1000;
  for (int round = 0; round < kRounds; ++round) {
    auto* mine = static_cast<uint32_t*>(ncclGetLocalPointer(win, 0));
    for (size_t i = first; i < last; ++i) mine[i] = pattern(dev.rank, round, i);
    ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev, ncclTeamTagLsa(), uint32_t(block)};
    if (bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, kTimeout) != ncclSuccess)
      return "round " + std::to_string(round) + ": the barrier timed out";
    ncclTeam lsa = ncclTeamLsa(dev);
    for (int p = 0; p < lsa.nRanks; ++p) {
      auto* theirs = static_cast<const uint32_t*>(ncclGetLsaPointer(win, 0, p));
      if (theirs != ncclGetPeerPointer(win, 0, ncclTeamWorld(dev), ncclTeamRankToWorld(dev, lsa, p)))
        return "ncclGetLsaPointer and ncclGetPeerPointer disagree on peer " + std::to_string(p);
      for (size_t i = first; i < last; ++i)
        if (theirs[i] != pattern(ncclTeamRankToWorld(dev, lsa, p), round, i))
          return "round " + std::to_string(round) + ": word " + std::to_string(i) + " of LSA peer " +
                 std::to_string(p) + " is not what it wrote";
    }
    if (bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, kTimeout) != ncclSuccess)
      return "round " + std::to_string(round) + ": the closing barrier timed out";
  }
  return "";
}

std::string lsaKernel(const ncclDevComm& dev, ncclWindow_t win) {
  std::string wrong[kBlocks];
  std::vector<std::thread> blocks;
  for (int b = 0; b < kBlocks; ++b) blocks.emplace_back([&, b] { wrong[b] = lsaBlock(dev, win, b); });
  for (auto& t : blocks) t.join();
  for (int b = 0; b < kBlocks; ++b)
    if (!wrong[b].empty()) return "block " + std::to_string(b) + ": " + wrong[b];
  return "";
}

// One rank's part of the whole sequence, run by its own thread (process
// or not): register a window, check the pointers the host sees, create a
// device communicator, run the kernel, release everything.
std::string rankSequence(ncclComm_t comm, void* buff) {
  const size_t bytes = kWords * sizeof(uint32_t);
  ncclWindow_t win = nullptr;
  if (ncclCommWindowRegister(comm, buff, bytes, &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess)
    return std::string("register: ") + ncclGetLastError(nullptr);
  void* user = nullptr;
  if (ncclWinGetUserPtr(comm, win, &user) != ncclSuccess || user != buff) return "ncclWinGetUserPtr is not buff";
  int rank = -1, n = 0;
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n);
  // Every peer's window is mapped; within the process the mapping is the
  // peer's own pointer (checked by the caller, which knows them).
  for (int p = 0; p < n; ++p) {
    void* at = nullptr;
    if (ncclGetPeerDevicePointer(win, 12, p, &at) != ncclSuccess)
      return "ncclGetPeerDevicePointer(" + std::to_string(p) + "): " + ncclGetLastError(nullptr);
    void* viaTable = nullptr;
    if (!comm->device->windows.peerAddress(static_cast<char*>(buff) + 12, 40, p, &viaTable) || viaTable != at)
      return "the data paths' lookup disagrees with ncclGetPeerDevicePointer for peer " + std::to_string(p);
  }
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  if (ncclCommQueryProperties(comm, &props) != ncclSuccess || !props.deviceApiSupport || props.nLsaTeams != 1 ||
      !props.hostRmaSupport || props.ginType != NCCL_GIN_TYPE_NONE)
    return "ncclCommQueryProperties does not report the device API for an LSA communicator";
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = kBlocks;
  ncclDevResourceHandle_t scratch = 0;
  ncclDevResourceRequirements_t res = {};
  res.bufferSize = 4096;
  res.bufferAlign = 256;
  res.outBufferHandle = &scratch;
  reqs.resourceRequirementsList = &res;
  ncclDevComm dev;
  if (ncclDevCommCreate(comm, &reqs, &dev) != ncclSuccess)
    return std::string("ncclDevCommCreate: ") + ncclGetLastError(nullptr);
  if (dev.rank != rank || dev.nRanks != n || dev.lsaRank != rank || dev.lsaSize != n ||
      dev.lsaBarrier.nBarriers != kBlocks)
    return "the device communicator's ranks or barriers are wrong";
  if (ncclGetResourceBufferOffset(scratch) % 256 != 0 ||
      reinterpret_cast<uintptr_t>(ncclGetResourceBufferLocalPointer(dev, scratch)) % 256 != 0)
    return "the resource buffer is not aligned as asked";
  std::string wrong = lsaKernel(dev, win);
  if (!wrong.empty()) return wrong;
  if (ncclDevCommDestroy(comm, &dev) != ncclSuccess) return std::string("destroy dev: ") + ncclGetLastError(nullptr);
  if (ncclDevCommDestroy(comm, &dev) == ncclSuccess) return "a second ncclDevCommDestroy of one devComm succeeded";
  if (ncclCommWindowDeregister(comm, win) != ncclSuccess)
    return std::string("deregister: ") + ncclGetLastError(nullptr);
  if (comm->device->windows.count() != 0) return "a deregistered window is still in the data paths' table";
  return "";
}

// One-sided: every rank puts kWords words of its own into every peer's
// window (block `rank`, itself included), then signals it twice more; every
// rank waits for the three signals of each peer and checks each block.
// Once this rank's waits are done no peer writes its window any more, so
// it may deregister and free it without a meeting.
std::string oneSidedExchange(ncclComm_t comm, int rank, int n, cudaStream_t stream) {
  const size_t block = kWords * sizeof(uint32_t);
  void* recv = nullptr;
  if (ncclMemAlloc(&recv, block * n) != ncclSuccess) return "alloc";
  memset(recv, 0, block * n);
  ncclWindow_t win;
  if (ncclCommWindowRegister(comm, recv, block * n, &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess)
    return std::string("register: ") + ncclGetLastError(nullptr);
  std::vector<uint32_t> send(kWords);
  for (size_t i = 0; i < kWords; ++i) send[i] = pattern(rank, 1000, i);
  for (int p = 0; p < n; ++p) {
    if (ncclPutSignal(send.data(), kWords, ncclUint32, p, win, block * rank, 0, 0, 0, comm, stream) != ncclSuccess)
      return "put to " + std::to_string(p) + ": " + ncclGetLastError(nullptr);
    for (int k = 0; k < 2; ++k)
      if (ncclSignal(p, 0, 0, 0, comm, stream) != ncclSuccess)
        return "signal to " + std::to_string(p) + ": " + ncclGetLastError(nullptr);
  }
  std::vector<ncclWaitSignalDesc_t> descs;
  for (int p = 0; p < n; ++p) descs.push_back({3, p, 0, 0});
  if (ncclWaitSignal(n, descs.data(), comm, stream) != ncclSuccess)
    return std::string("wait: ") + ncclGetLastError(nullptr);
  if (gyre::deviceRuntime()->streamSynchronize(stream) != ncclSuccess) return "stream";
  for (int p = 0; p < n; ++p)
    for (size_t i = 0; i < kWords; ++i)
      if (static_cast<uint32_t*>(recv)[p * kWords + i] != pattern(p, 1000, i))
        return "word " + std::to_string(i) + " put by rank " + std::to_string(p) + " is wrong";
  if (ncclCommWindowDeregister(comm, win) != ncclSuccess) return std::string("deregister: ") + ncclGetLastError(nullptr);
  ncclMemFree(recv);
  return "";
}

int ranksOfOneProcess(std::vector<int> devs) {
  const int n = static_cast<int>(devs.size());
  std::vector<ncclComm_t> comms(n);
  RANK_CHECK(ncclCommInitAll(comms.data(), n, devs.data()) == ncclSuccess, "init: %s", lastError().c_str());
  std::vector<void*> bufs(n);
  for (int r = 0; r < n; ++r) {
    gyre::deviceRuntime()->setDevice(devs[r]);  // each rank's memory on its own device
    RANK_CHECK(ncclMemAlloc(&bufs[r], kWords * sizeof(uint32_t)) == ncclSuccess, "alloc: %s", lastError().c_str());
  }
  std::vector<std::string> outcome(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      gyre::deviceRuntime()->setDevice(devs[r]);  // a rank's thread drives its device, its stream made there
      outcome[r] = rankSequence(comms[r], bufs[r]);
      if (outcome[r].empty()) outcome[r] = oneSidedExchange(comms[r], r, n, fakeStream(7 + r));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) RANK_CHECK(outcome[r].empty(), "rank %d: %s", r, outcome[r].c_str());
  for (int r = 0; r < n; ++r) {
    RANK_CHECK(ncclMemFree(bufs[r]) == ncclSuccess, "free");
    RANK_CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy: %s", lastError().c_str());
  }
  return 0;
}

// Within one process a peer's mapping is its own pointer. One thread sets
// up both ranks, grouping the collective set-up calls as NCCL allows: they
// run, and fill their results, at ncclGroupEnd.
int inProcessPointersAreThePeers() {
  int devs[2] = {0, 0};
  ncclComm_t comms[2];
  RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "init: %s", lastError().c_str());
  void* bufs[2];
  ncclWindow_t wins[2] = {nullptr, nullptr};
  ncclDevComm devs2[2];
  for (auto& b : bufs) RANK_CHECK(ncclMemAlloc(&b, 4096) == ncclSuccess, "alloc");
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group");
  for (int r = 0; r < 2; ++r) {
    RANK_CHECK(ncclCommWindowRegister(comms[r], bufs[r], 4096, &wins[r], 0) == ncclSuccess, "register");
    RANK_CHECK(ncclDevCommCreate(comms[r], &reqs, &devs2[r]) == ncclSuccess, "create");
  }
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  for (int r = 0; r < 2; ++r) {
    RANK_CHECK(wins[r] && devs2[r].rank == r && devs2[r].lsaSize == 2, "rank %d's grouped set-up left no result", r);
    for (int p = 0; p < 2; ++p) {
      void* at = nullptr;
      RANK_CHECK(ncclGetLsaDevicePointer(wins[r], 100, p, &at) == ncclSuccess && at == static_cast<char*>(bufs[p]) + 100,
                 "rank %d's view of rank %d", r, p);
    }
  }
  // A grouped set-up that fails fails ncclGroupEnd with its message.
  ncclWindow_t bad[2];
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group");
  for (int r = 0; r < 2; ++r)
    ncclCommWindowRegister(comms[r], bufs[r], 1024 * (r + 1), &bad[r], NCCL_WIN_COLL_SYMMETRIC);
  RANK_CHECK(ncclGroupEnd() == ncclInvalidUsage && lastError().find("symmetric window") != std::string::npos,
             "mismatched grouped windows: %s", lastError().c_str());
  for (int r = 0; r < 2; ++r)
    RANK_CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy with a device communicator and a window left");
  for (auto& b : bufs) ncclMemFree(b);
  return 0;
}

// Ranks in their own processes: IPC-mapped windows, the kernel across
// processes, then one-sided puts and signals; nothing left after destroy.
int processRank(int rank, int n, const ncclUniqueId& id) {
  // Warm the fake runtime (its first allocation opens a block for good).
  void* warm = nullptr;
  RANK_CHECK(ncclMemAlloc(&warm, 64) == ncclSuccess, "alloc");
  const int fdsBefore = countOpenFds();
  const std::map<int, std::string> fdList = listOpenFds();
  const int mappingsBefore = fakeDeviceMappings();
  ncclComm_t comm;
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
  void* buff = nullptr;
  RANK_CHECK(ncclMemAlloc(&buff, kWords * sizeof(uint32_t)) == ncclSuccess, "alloc");
  std::string wrong = rankSequence(comm, buff);
  RANK_CHECK(wrong.empty(), "%s", wrong.c_str());

  std::string oneSided = oneSidedExchange(comm, rank, n, fakeStream(7));
  RANK_CHECK(oneSided.empty(), "%s", oneSided.c_str());
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
  ncclMemFree(buff);
  // Every peer block opened by CUDA IPC was closed again, and this rank's
  // own blocks freed: nothing of the windows or signals is left.
  // The frees teardown handed to gyre's free thread are made first, so the
  // thread count taken as the baseline does not include that thread.
  RANK_CHECK(gyre::waitForDeferredFrees(5.0), "teardown's frees still pending after 5 s");
  std::string left = waitForBaseline(fdsBefore, countThreads(), fdList, 3.0);
  RANK_CHECK(left.empty(), "after destroy: %s", left.c_str());
  RANK_CHECK(fakeDeviceMappings() == mappingsBefore, "%d mappings of device memory before, %d after destroy",
             mappingsBefore, fakeDeviceMappings());
  ncclMemFree(warm);
  return 0;
}

bool says(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

int badInput(int, int, const ncclUniqueId&) {
  int devs[2] = {0, 0};
  ncclComm_t comms[2];
  RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "init: %s", lastError().c_str());
  // One-sided before any window, and with values NCCL does not define.
  RANK_CHECK(ncclSignal(1, 0, 0, 0, comms[0], fakeStream(1)) == ncclInvalidUsage &&
                 says(lastError(), "registered no window"), "%s", lastError().c_str());
  RANK_CHECK(ncclSignal(1, 1, 0, 0, comms[0], fakeStream(1)) == ncclInvalidArgument && says(lastError(), "sigIdx"),
             "%s", lastError().c_str());
  // GIN requirements: both ranks refuse, naming what is missing.
  std::string errs[2];
  ncclResult_t rs[2];
  auto both = [&](auto fn) {
    std::vector<std::thread> t;
    for (int r = 0; r < 2; ++r) t.emplace_back([&, r] {
      rs[r] = fn(r);
      errs[r] = ncclGetLastError(nullptr);
    });
    for (auto& x : t) x.join();
  };
  ncclDevComm dev[2];
  both([&](int r) {
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.ginSignalCount = 4;
    reqs.barrierCount = r;  // rank 1 asks for more: the error names rank 0's first
    return ncclDevCommCreate(comms[r], &reqs, &dev[r]);
  });
  for (int r = 0; r < 2; ++r)
    RANK_CHECK(rs[r] == ncclInvalidUsage && says(errs[r], "ncclDevCommCreate: rank 0") &&
                   says(errs[r], "ginSignalCount"), "rank %d: %s", r, errs[r].c_str());
  // Windows of different sizes where symmetry is required.
  void* bufs[2];
  for (auto& b : bufs) RANK_CHECK(ncclMemAlloc(&b, 8192) == ncclSuccess, "alloc");
  ncclWindow_t wins[2];
  both([&](int r) { return ncclCommWindowRegister(comms[r], bufs[r], 4096 + 1024 * r, &wins[r], NCCL_WIN_COLL_SYMMETRIC); });
  for (int r = 0; r < 2; ++r)
    RANK_CHECK(rs[r] == ncclInvalidUsage && says(errs[r], "symmetric window") && says(errs[r], "ncclCommWindowRegister"),
               "rank %d: %s", r, errs[r].c_str());
  // A device communicator's resources are not the user's to deregister.
  both([&](int r) {
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 1;
    return ncclDevCommCreate(comms[r], &reqs, &dev[r]);
  });
  RANK_CHECK(rs[0] == ncclSuccess && rs[1] == ncclSuccess, "create: %s / %s", errs[0].c_str(), errs[1].c_str());
  RANK_CHECK(ncclCommWindowDeregister(comms[0], dev[0].resourceWindow) == ncclInvalidUsage &&
                 says(lastError(), "ncclDevCommDestroy"), "%s", lastError().c_str());
  // A put past the window, and to a window of another communicator.
  both([&](int r) { return ncclCommWindowRegister(comms[r], bufs[r], 4096, &wins[r], 0); });
  RANK_CHECK(rs[0] == ncclSuccess && rs[1] == ncclSuccess, "register");
  RANK_CHECK(ncclPutSignal(bufs[0], 1025, ncclFloat, 1, wins[0], 0, 0, 0, 0, comms[0], fakeStream(1)) ==
                 ncclInvalidArgument && says(lastError(), "overrun"), "%s", lastError().c_str());
  RANK_CHECK(ncclPutSignal(bufs[0], 1, ncclFloat, 1, wins[1], 0, 0, 0, 0, comms[0], fakeStream(1)) ==
                 ncclInvalidArgument && says(lastError(), "not a window registered"), "%s", lastError().c_str());
  // Destroy releases the device communicators and windows left behind.
  for (int r = 0; r < 2; ++r) RANK_CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy: %s", lastError().c_str());
  for (auto& b : bufs) ncclMemFree(b);
  return 0;
}

// Ranks on different hosts (NCCL_HOSTID) are not load/store accessible.
int otherHosts(int rank, int n, const ncclUniqueId&) {
  ncclUniqueId id;
  ncclComm_t comm;
  RANK_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "id");
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  RANK_CHECK(ncclCommQueryProperties(comm, &props) == ncclSuccess && !props.deviceApiSupport, "properties");
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  ncclDevComm dev;
  RANK_CHECK(ncclDevCommCreate(comm, &reqs, &dev) == ncclInvalidUsage && says(lastError(), "load/store accessible") &&
                 says(lastError(), "is on host"), "%s", lastError().c_str());
  void* buff = nullptr;
  RANK_CHECK(ncclMemAlloc(&buff, 4096) == ncclSuccess, "alloc");
  ncclWindow_t win;
  RANK_CHECK(ncclCommWindowRegister(comm, buff, 4096, &win, 0) == ncclSuccess, "register: %s", lastError().c_str());
  void* at = nullptr;
  RANK_CHECK(ncclGetPeerDevicePointer(win, 0, 1 - rank, &at) == ncclInvalidUsage, "a peer on another host mapped");
  RANK_CHECK(ncclPutSignal(buff, 4, ncclInt8, 1 - rank, win, 0, 0, 0, 0, comm, fakeStream(3)) == ncclInvalidUsage &&
                 says(lastError(), "not load/store accessible"), "%s", lastError().c_str());
  RANK_CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister");
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
  ncclMemFree(buff);
  return 0;
}

// ---- ncclSymPtr and the reduce/copy building blocks ---------------------------
// Ranks of one process each run an emulated kernel against their window:
// symmetric pointers must name the bytes the host-side lookups name, and
// every reduce/copy helper must leave what an independent reference says
// (sums in double or exact integers, of values each rank wrote), for
// several types and counts 0, 1 and primes.

constexpr size_t kMaxCount = 1009;  // prime
const size_t kHelperCounts[] = {0, 1, 2, 7, 131, kMaxCount};

// What rank r writes at element i for count c: exact in every T tested (so
// sums of a few ranks are exact and comparisons need no tolerance).
template <typename T>
T helperValue(int r, size_t i, size_t c) {
  const int64_t h = int64_t(pattern(r, int(c), i) % 20001u) - 10000;
  if (std::is_floating_point<T>::value) return T(double(h) / 8.0);  // eighths: exact in float and double
  return T(h * 7919);
}

// A group of `n` host threads, this one being `r` (the helpers divide the
// elements by thread_rank() and size(), as a CTA's threads would).
struct HostGroup {
  int r, n;
  int thread_rank() const { return r; }
  int size() const { return n; }
  int num_threads() const { return n; }
  void sync() {}
};

template <typename T>
struct MaxOp {
  T operator()(const T& a, const T& b) const { return a < b ? b : a; }
};

// Regions of each rank's window, in elements of T: A (kMaxCount: this
// rank's values), then B (nRanks x kMaxCount: filled by peers).
template <typename T>
std::string helpersOf(const ncclDevComm& dev, ncclWindow_t win, const char* typeName) {
  constexpr uint64_t kTimeout = 20ull * 1000 * 1000 * 1000;
  const int n = dev.nRanks, me = dev.rank;
  const ncclTeam lsa = ncclTeamLsa(dev);
  const size_t offA = 0, offB = kMaxCount * sizeof(T);
  ncclSymPtr<T> symA(win, offA), symB(win, offB);
  T* a = symA.localPtr();
  T* b = symB.localPtr();
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev, ncclTeamTagLsa(), 0};
  auto meet = [&]() { return bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, kTimeout) == ncclSuccess; };
  auto where = [&](const char* what, size_t c, size_t i) {
    return std::string(typeName) + " count " + std::to_string(c) + ": " + what + " element " + std::to_string(i);
  };
  const T sentinel = T(-12345);
  for (size_t c : kHelperCounts) {
    for (size_t i = 0; i < kMaxCount; ++i) a[i] = helperValue<T>(me, i, c);
    for (size_t i = 0; i < size_t(n) * kMaxCount; ++i) b[i] = sentinel;
    std::vector<double> sum(kMaxCount, 0);
    std::vector<T> max(kMaxCount);
    for (size_t i = 0; i < kMaxCount; ++i) {
      max[i] = helperValue<T>(0, i, c);
      for (int p = 0; p < n; ++p) {
        sum[i] += double(helperValue<T>(p, i, c));
        max[i] = std::max(max[i], helperValue<T>(p, i, c));
      }
    }
    if (!meet()) return "barrier after writing A timed out";

    // N -> 1: every rank's A summed into a local buffer (ncclSymPtr + devComm,
    // window + team), and the largest through a lambda and an operator.
    std::vector<T> out(kMaxCount + 1, sentinel);
    ncclLsaReduceSum(ncclCoopCta(), symA, out.data(), c, dev);
    for (size_t i = 0; i <= kMaxCount; ++i)
      if (i < c ? double(out[i]) != sum[i] : out[i] != sentinel) return where("ncclLsaReduceSum", c, i);
    std::fill(out.begin(), out.end(), sentinel);
    ncclLsaReduceSum<T>(ncclCoopCta(), win, offA, out.data(), c, lsa);
    for (size_t i = 0; i <= kMaxCount; ++i)
      if (i < c ? double(out[i]) != sum[i] : out[i] != sentinel) return where("ncclLsaReduceSum (window)", c, i);
    std::fill(out.begin(), out.end(), sentinel);
    T* local = out.data();
    ncclLsaReduceLsaCopy<T>(ncclCoopCta(), [&](int p) { return symA.lsaPtr(p); }, lsa.nRanks,
                            [&](int) { return local; }, 1, MaxOp<T>(), c);
    for (size_t i = 0; i <= kMaxCount; ++i)
      if (i < c ? out[i] != max[i] : out[i] != sentinel) return where("ncclLsaReduceLsaCopy (max)", c, i);

    // 1 -> N: this rank's A into its block of every peer's B.
    ncclLsaCopy(ncclCoopCta(), a, symB + size_t(me) * c, c, lsa);
    if (!meet()) return "barrier after ncclLsaCopy timed out";
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < c; ++i)
        if (b[size_t(p) * c + i] != helperValue<T>(p, i, c)) return where("ncclLsaCopy from rank", c, i);
    if (c < kMaxCount && b[size_t(n) * c] != sentinel) return where("ncclLsaCopy wrote past", c, size_t(n) * c);

    // Local, strided: B now holds n blocks of c elements.
    std::fill(out.begin(), out.end(), sentinel);
    ncclLocalReduceSum(ncclCoopCta(), n, b, c, out.data(), c);
    for (size_t i = 0; i <= kMaxCount; ++i)
      if (i < c ? double(out[i]) != sum[i] : out[i] != sentinel) return where("ncclLocalReduceSum", c, i);
    std::vector<T> two(2 * kMaxCount + 1, sentinel);
    ncclLocalCopy(ncclCoopCta(), a, 2, two.data(), c, c);
    for (size_t i = 0; i < 2 * c; ++i)
      if (two[i] != a[i % c]) return where("ncclLocalCopy", c, i);
    if (two[2 * c] != sentinel) return where("ncclLocalCopy wrote past", c, 2 * c);
    std::fill(two.begin(), two.end(), sentinel);
    ncclLocalReduceSumCopy(ncclCoopCta(), n, b, c, 2, two.data(), c, c);
    for (size_t i = 0; i < 2 * c; ++i)
      if (double(two[i]) != sum[i % c]) return where("ncclLocalReduceSumCopy", c, i);
    if (!meet()) return "barrier before ncclLsaReduceSumCopy timed out";

    // N -> N, all-reduce style: each rank sums its share of the elements
    // from every peer's A into every peer's B, by a group of 3 threads.
    const size_t lo = c * size_t(me) / size_t(n), hi = c * size_t(me + 1) / size_t(n);
    std::vector<std::thread> group;
    for (int t = 0; t < 3; ++t)
      group.emplace_back([&, t] { ncclLsaReduceSumCopy(HostGroup{t, 3}, symA + lo, symB + lo, hi - lo, lsa); });
    for (auto& t : group) t.join();
    if (!meet()) return "barrier after ncclLsaReduceSumCopy timed out";
    for (size_t i = 0; i < c; ++i)
      if (double(b[i]) != sum[i]) return where("ncclLsaReduceSumCopy", c, i);
    if (!meet()) return "closing barrier timed out";
  }
  return "";
}

// Symmetric pointers against the host's view of the window (the same
// bytes every peer wrote), their arithmetic, and the group helpers.
std::string symPtrFacts(ncclComm_t comm, const ncclDevComm& dev, ncclWindow_t win) {
  const ncclTeam lsa = ncclTeamLsa(dev), world = ncclTeamWorld(dev);
  ncclSymPtr<uint32_t> p(win, 8);
  if (p.localPtr() != ncclGetLocalPointer(win, 8)) return "localPtr is not ncclGetLocalPointer";
  for (int q = 0; q < lsa.nRanks; ++q) {
    void* host = nullptr;
    if (ncclGetLsaDevicePointer(win, 8, q, &host) != ncclSuccess) return "ncclGetLsaDevicePointer";
    const int w = ncclTeamRankToWorld(dev, lsa, q);
    if (p.lsaPtr(q) != host || p.peerPtr(w) != host || p.peerPtr(lsa, q) != host || p.peerPtr(world, w) != host)
      return "ncclSymPtr's pointers to peer " + std::to_string(q) + " are not the host's";
  }
  if (p.peerPtr(dev.nRanks) != nullptr || p.peerPtr(-1) != nullptr) return "a rank outside the LSA team has a pointer";
  ncclSymPtr<uint32_t> q = p + 5;
  if (q.offset != 8 + 5 * sizeof(uint32_t) || q - p != 5 || p - q != -5 || q.window != win)
    return "ncclSymPtr + 5 is not five elements on";
  q -= 5u;
  q += 3ll;
  q -= size_t(3);
  if (q != p || !(q == p) || q + 1 == p) return "ncclSymPtr += / -= do not move by elements";
  ncclSymPtr<char> bytes = p + 1;
  if (bytes.offset != 12 || (bytes + 3).offset != 15 || ncclSymPtr<uint32_t>(bytes - 4) != p)
    return "ncclSymPtr<char> does not count bytes";
  if (p.multimemPtr(dev.lsaMultimem) != nullptr || p.lsaMultimemPtr(dev) != nullptr)
    return "a multimem pointer without multimem";
  ncclSymPtr<double> none;
  if (none.window != nullptr || none.offset != 0) return "a default ncclSymPtr is not null";
  // Through the pointers: every peer's words, as that peer wrote them.
  for (int r = 0; r < lsa.nRanks; ++r)
    for (size_t i = 0; i < 16; ++i)
      if ((p + i).lsaPtr(r)[0] != pattern(ncclTeamRankToWorld(dev, lsa, r), 77, 2 + i))
        return "word " + std::to_string(i) + " of LSA peer " + std::to_string(r) + " read through ncclSymPtr";

  ncclCoopAny any = ncclCoopCta();
  ncclCoopAny thread{ncclCoopThread()};
  any.sync();
  if (any.thread_rank() != 0 || any.size() != 1 || thread.num_threads() != 1) return "ncclCoopAny on the host";
  if (!ncclCoopIsThread(ncclCoopThread()) || ncclCoopIsThread(ncclCoopCta()) || !ncclCoopWithinWarp(ncclCoopWarp()) ||
      ncclCoopWithinWarp(ncclCoopWarpSpan(0, 2, 1)) || ncclCoopGetLaneMask(ncclCoopLanes(0x30u)) != 0x30u ||
      ncclCoopBcast(ncclCoopCta(), 41, 0) != 41)
    return "the group facts";

  // The rail: one LSA team, so this rank alone, lsaSize apart.
  const ncclTeam rail = ncclTeamRail(comm), devRail = ncclTeamRail(dev);
  if (rail.nRanks != 1 || rail.rank != 0 || rail.stride != dev.lsaSize || devRail.nRanks != rail.nRanks ||
      devRail.rank != rail.rank || devRail.stride != rail.stride)
    return "ncclTeamRail";
  void* mm = reinterpret_cast<void*>(1);
  if (ncclGetLsaMultimemDevicePointer(win, 0, &mm) != ncclSuccess || mm != nullptr) return "ncclGetLsaMultimemDevicePointer";
  mm = reinterpret_cast<void*>(1);
  if (ncclGetMultimemDevicePointer(win, 0, dev.lsaMultimem, &mm) != ncclSuccess || mm != nullptr)
    return "ncclGetMultimemDevicePointer";
  int notAWindow = 0;
  if (ncclGetLsaMultimemDevicePointer(reinterpret_cast<ncclWindow_t>(&notAWindow), 0, &mm) != ncclInvalidArgument ||
      !strstr(ncclGetLastError(nullptr), "not a registered window"))
    return "ncclGetLsaMultimemDevicePointer took a bad window";
  return "";
}

std::string helperSequence(ncclComm_t comm, void* buff, size_t bytes) {
  ncclWindow_t win = nullptr;
  if (ncclCommWindowRegister(comm, buff, bytes, &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess)
    return std::string("register: ") + ncclGetLastError(nullptr);
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = 1;
  ncclDevComm dev;
  if (ncclDevCommCreate(comm, &reqs, &dev) != ncclSuccess)
    return std::string("ncclDevCommCreate: ") + ncclGetLastError(nullptr);
  auto* words = static_cast<uint32_t*>(buff);
  for (size_t i = 0; i < 64; ++i) words[i] = pattern(dev.rank, 77, i);
  std::string wrong;
  {
    ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev, ncclTeamTagLsa(), 0};
    if (bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, 20ull * 1000 * 1000 * 1000) != ncclSuccess)
      wrong = "the first barrier timed out";
    if (wrong.empty()) wrong = symPtrFacts(comm, dev, win);
    if (bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel, 20ull * 1000 * 1000 * 1000) != ncclSuccess &&
        wrong.empty())
      wrong = "the barrier after the pointer checks timed out";
  }
  if (wrong.empty()) wrong = helpersOf<float>(dev, win, "float");
  if (wrong.empty()) wrong = helpersOf<double>(dev, win, "double");
  if (wrong.empty()) wrong = helpersOf<int32_t>(dev, win, "int32");
  if (wrong.empty()) wrong = helpersOf<int64_t>(dev, win, "int64");
  ncclDevCommDestroy(comm, &dev);
  ncclCommWindowDeregister(comm, win);
  return wrong;
}

int helpersOnRanks(std::vector<int> devs) {
  const int n = static_cast<int>(devs.size());
  std::vector<ncclComm_t> comms(n);
  RANK_CHECK(ncclCommInitAll(comms.data(), n, devs.data()) == ncclSuccess, "init: %s", lastError().c_str());
  const size_t bytes = size_t(n + 1) * kMaxCount * sizeof(int64_t);
  std::vector<void*> bufs(n);
  for (int r = 0; r < n; ++r)
    RANK_CHECK(ncclMemAlloc(&bufs[r], bytes) == ncclSuccess, "alloc: %s", lastError().c_str());
  std::vector<std::string> outcome(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { outcome[r] = helperSequence(comms[r], bufs[r], bytes); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) RANK_CHECK(outcome[r].empty(), "rank %d: %s", r, outcome[r].c_str());
  for (int r = 0; r < n; ++r) {
    RANK_CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy: %s", lastError().c_str());
    RANK_CHECK(ncclMemFree(bufs[r]) == ncclSuccess, "free");
  }
  return 0;
}

}  // namespace

TEST_CASE("ranks of one process on one GPU read each other's windows through LSA pointers between barriers",
          "[device][device_api]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return ranksOfOneProcess({0, 0, 0}); },
                              apiOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process on GPUs with peer access do too; a peer's mapping is its own pointer; grouped "
          "set-up calls run at ncclGroupEnd",
          "[device][device_api]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    int r = ranksOfOneProcess({0, 1});
    return r != 0 ? r : inProcessPointersAreThePeers();
  }, apiOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks in two processes map windows by CUDA IPC once, meet at LSA barriers, and put and signal",
          "[device][device_api]") {
  // The fake runs both processes' device code at once, as MPS would.
  RankOptions o = apiOptions();
  o.env.push_back({"GYRE_DEVICE_API_SHARED_GPU", "1"});
  RunResult result = runRanks(2, processRank, o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("GIN requirements, asymmetric windows, a device communicator's window and bad puts fail naming "
          "call and rank", "[device][device_api]") {
  RunResult result = runRanks(1, badInput, apiOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks in two processes on one GPU get no device communicator unless MPS is declared, naming the "
          "other process's rank", "[device][device_api]") {
  RunResult result = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    RANK_CHECK(ncclCommQueryProperties(comm, &props) == ncclSuccess && !props.deviceApiSupport,
               "properties offer the device API to processes taking turns on one GPU");
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 1;
    ncclDevComm dev;
    // Both refuse with the first rank's reason.
    RANK_CHECK(ncclDevCommCreate(comm, &reqs, &dev) == ncclInvalidUsage &&
                   says(lastError(), "rank 0 cannot serve the requirements: rank 1 is another process on this "
                                     "rank's GPU (rank 0)") &&
                   says(lastError(), "GYRE_DEVICE_API_SHARED_GPU=1"), "%s", lastError().c_str());
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    return 0;
  }, apiOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks on different hosts get no device communicator and no one-sided access", "[device][device_api]") {
  RankOptions o = apiOptions();
  o.idMode = IdMode::kEnvCommId;
  o.rankEnv = [](int rank) {
    return std::vector<std::pair<std::string, std::optional<std::string>>>{
        {"NCCL_HOSTID", "host-" + std::to_string(rank)}};
  };
  RunResult result = runRanks(2, otherHosts, o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ncclSymPtr names the window's bytes on every LSA peer, and the reduce/copy helpers equal a reference "
          "for float, double, int32 and int64 over counts 0, 1 and primes",
          "[device][device_api]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return helpersOnRanks({0, 0, 0}); }, apiOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}
