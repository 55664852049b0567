// An 8-GPU node on the fake CUDA runtime, as a first run meets it, held to
// the driver's multi-device rules (tests/support/fake_cuda/fake_devices.h):
//   - one thread driving 8 devices (nccl-tests -g 8, ncclCommInitAll), every
//     rank's calls in one group with whatever device the application left
//     current, 0 or 7: every collective, a send/receive ring and AllToAll,
//     and AllReduce with the ring captured into graphs;
//   - ranks in processes of their own, one device each (torchrun), with
//     gyre's watchdogs running: no process makes a context on a device it
//     does not own.
// Results are exact (int32 sums against sums made here); buffers are small,
// so the whole file takes seconds.
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/comm/executor_binding.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/device_comm.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "tests/support/fake_cuda/fake_devices.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

constexpr int kDevices = 8;
constexpr size_t kCount = 67;  // int32s per rank and block: small, and indivisible by 8

gyre::DeviceRuntime* rt() { return gyre::deviceRuntime(); }

RankOptions nodeOptions(const char* path = nullptr) {
  RankOptions o;
  o.timeout_s = 90;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "20"}, {"GYRE_INIT_TIMEOUT", "20"}};
  if (path) o.env.push_back({"GYRE_DEVICE_PATH", path});
  return o;
}

int32_t valueOf(int rank, size_t i) { return int32_t(rank * 7919 + int(i) * 13 + 1); }

// One rank's device memory and stream, made with its device current.
struct Rank {
  int device = -1;
  cudaStream_t stream = nullptr;
  int32_t* in = nullptr;         // kDevices blocks of kCount
  int32_t* sum = nullptr;        // AllReduce
  int32_t* reduced = nullptr;    // Reduce to rank 3
  int32_t* bcast = nullptr;      // Broadcast from rank 5
  int32_t* gathered = nullptr;   // AllGather, kDevices blocks
  int32_t* scattered = nullptr;  // ReduceScatter
  int32_t* ring = nullptr;       // from the previous rank
  int32_t* a2a = nullptr;        // AllToAll, kDevices blocks
  std::vector<void*> owned;

  int32_t* alloc(size_t count) {
    void* p = nullptr;
    if (rt()->deviceAlloc(count * sizeof(int32_t), &p) != ncclSuccess) return nullptr;
    owned.push_back(p);
    return static_cast<int32_t*>(p);
  }
  bool make(int d) {
    device = d;
    if (rt()->setDevice(d) != ncclSuccess || rt()->streamCreate(&stream) != ncclSuccess) return false;
    in = alloc(kCount * kDevices);
    sum = alloc(kCount);
    reduced = alloc(kCount);
    bcast = alloc(kCount);
    gathered = alloc(kCount * kDevices);
    scattered = alloc(kCount);
    ring = alloc(kCount);
    a2a = alloc(kCount * kDevices);
    return a2a != nullptr;
  }
  void release() {
    rt()->setDevice(device);
    for (void* p : owned) rt()->deviceFree(p);
    if (stream) rt()->streamDestroy(stream);
  }
};

// Every call of every rank in one group from this thread, with `current`
// the device the application left current; then each output against sums
// made here, and the current device as the application left it.
int everyCallInOneGroup(std::vector<ncclComm_t>& comms, std::vector<Rank>& ranks, int current) {
  const int n = static_cast<int>(comms.size());
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < kCount * n; ++i) ranks[r].in[i] = valueOf(r, i) + current;
    std::memset(ranks[r].ring, 0xff, kCount * sizeof(int32_t));
  }
  RANK_CHECK(rt()->setDevice(current) == ncclSuccess, "cudaSetDevice(%d)", current);
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[r];
    cudaStream_t s = k.stream;
    RANK_CHECK(ncclAllReduce(k.in, k.sum, kCount, ncclInt32, ncclSum, comms[r], s) == ncclSuccess &&
                   ncclReduce(k.in, k.reduced, kCount, ncclInt32, ncclSum, 3, comms[r], s) == ncclSuccess &&
                   ncclBroadcast(k.in, k.bcast, kCount, ncclInt32, 5, comms[r], s) == ncclSuccess &&
                   ncclAllGather(k.in, k.gathered, kCount, ncclInt32, comms[r], s) == ncclSuccess &&
                   ncclReduceScatter(k.in, k.scattered, kCount, ncclInt32, ncclSum, comms[r], s) == ncclSuccess &&
                   ncclSend(k.in, kCount, ncclInt32, (r + 1) % n, comms[r], s) == ncclSuccess &&
                   ncclRecv(k.ring, kCount, ncclInt32, (r + n - 1) % n, comms[r], s) == ncclSuccess &&
                   ncclAlltoAll(k.in, k.a2a, kCount, ncclInt32, comms[r], s) == ncclSuccess,
               "rank %d with device %d current: %s", r, current, lastError().c_str());
  }
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end with device %d current: %s", current, lastError().c_str());
  int after = -1;
  rt()->currentDevice(&after);
  RANK_CHECK(after == current, "gyre left device %d current, not the application's %d", after, current);
  for (int r = 0; r < n; ++r) {
    RANK_CHECK(rt()->streamSynchronize(ranks[r].stream) == ncclSuccess, "rank %d's stream: %s", r,
               lastError().c_str());
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comms[r], &async);
    RANK_CHECK(async == ncclSuccess, "rank %d: async error %d: %s", r, int(async), lastError().c_str());
  }
  RANK_CHECK(!rt()->contextBroken(), "the context broke: %s", lastError().c_str());
  for (int r = 0; r < n; ++r) {
    const Rank& k = ranks[r];
    for (size_t i = 0; i < kCount; ++i) {
      int32_t sum = 0, block = 0;
      for (int p = 0; p < n; ++p) {
        sum += valueOf(p, i) + current;
        block += valueOf(p, r * kCount + i) + current;
      }
      RANK_CHECK(k.sum[i] == sum, "rank %d: AllReduce element %zu is %d, not %d", r, i, k.sum[i], sum);
      if (r == 3) RANK_CHECK(k.reduced[i] == sum, "Reduce element %zu is %d, not %d", i, k.reduced[i], sum);
      RANK_CHECK(k.bcast[i] == valueOf(5, i) + current, "rank %d: Broadcast element %zu is %d", r, i, k.bcast[i]);
      RANK_CHECK(k.scattered[i] == block, "rank %d: ReduceScatter element %zu is %d, not %d", r, i, k.scattered[i],
                 block);
      const int prev = (r + n - 1) % n;
      RANK_CHECK(k.ring[i] == valueOf(prev, i) + current, "rank %d: element %zu from rank %d is %d", r, i, prev,
                 k.ring[i]);
      for (int p = 0; p < n; ++p) {
        RANK_CHECK(k.gathered[p * kCount + i] == valueOf(p, i) + current, "rank %d: AllGather block %d element %zu",
                   r, p, i);
        RANK_CHECK(k.a2a[p * kCount + i] == valueOf(p, r * kCount + i) + current,
                   "rank %d: AllToAll block %d element %zu is %d", r, p, i, k.a2a[p * kCount + i]);
      }
    }
  }
  return 0;
}

// AllReduce and the send/receive ring captured into one graph per rank
// (nccl-tests -G) with device 0 current, then the graphs launched twice with
// device 7 current; each launch moves that launch's inputs.
int capturedOverEightDevices(std::vector<ncclComm_t>& comms, std::vector<Rank>& ranks) {
  const int n = static_cast<int>(comms.size());
  std::vector<gyre::FakeGraph> graphs(n);
  for (int r = 0; r < n; ++r)
    RANK_CHECK(gyre::fakeBeginCapture(ranks[r].stream, &graphs[r]) == 0, "rank %d: begin capture", r);
  RANK_CHECK(rt()->setDevice(0) == ncclSuccess, "cudaSetDevice(0)");
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r) {
    Rank& k = ranks[r];
    RANK_CHECK(ncclAllReduce(k.in, k.sum, kCount, ncclInt32, ncclSum, comms[r], k.stream) == ncclSuccess &&
                   ncclSend(k.in, kCount, ncclInt32, (r + 1) % n, comms[r], k.stream) == ncclSuccess &&
                   ncclRecv(k.ring, kCount, ncclInt32, (r + n - 1) % n, comms[r], k.stream) == ncclSuccess,
               "captured calls of rank %d: %s", r, lastError().c_str());
  }
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "captured group end: %s", lastError().c_str());
  for (int r = 0; r < n; ++r) {
    const int ended = gyre::fakeEndCapture(ranks[r].stream);
    RANK_CHECK(ended == 0, "rank %d: the capture ended with %s", r, gyre::fakeCudaErrorName(ended));
  }
  // The captured pairs' flags and scratch live on each rank's own GPU, not
  // on the device that happened to be current.
  for (int r = 0; r < n; ++r) {
    const gyre::CopyState* copies = comms[r]->device->copies.get();
    RANK_CHECK(copies && copies->captured, "rank %d has no captured pairs", r);
    for (void* block : copies->captured->blocks)
      RANK_CHECK(gyre::fakeDeviceOf(block) == ranks[r].device, "rank %d's captured-pair flags are on device %d", r,
                 gyre::fakeDeviceOf(block));
  }
  RANK_CHECK(rt()->setDevice(7) == ncclSuccess, "cudaSetDevice(7)");
  for (int launch = 1; launch <= 2; ++launch) {
    const int32_t salt = 1000 * launch;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < kCount * n; ++i) ranks[r].in[i] = valueOf(r, i) + salt;
      std::memset(ranks[r].ring, 0xff, kCount * sizeof(int32_t));
    }
    for (int r = 0; r < n; ++r)
      RANK_CHECK(gyre::fakeLaunchGraph(graphs[r], ranks[r].stream) == 0, "rank %d: graph launch", r);
    for (int r = 0; r < n; ++r)
      RANK_CHECK(rt()->streamSynchronize(ranks[r].stream) == ncclSuccess, "launch %d, rank %d's stream: %s", launch,
                 r, lastError().c_str());
    RANK_CHECK(!rt()->contextBroken(), "the context broke: %s", lastError().c_str());
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < kCount; ++i) {
        int32_t sum = 0;
        for (int p = 0; p < n; ++p) sum += valueOf(p, i) + salt;
        RANK_CHECK(ranks[r].sum[i] == sum, "launch %d, rank %d: AllReduce element %zu is %d, not %d", launch, r, i,
                   ranks[r].sum[i], sum);
        const int prev = (r + n - 1) % n;
        RANK_CHECK(ranks[r].ring[i] == valueOf(prev, i) + salt, "launch %d, rank %d: element %zu from rank %d is %d",
                   launch, r, i, prev, ranks[r].ring[i]);
      }
  }
  return 0;
}

int oneThreadOverEightDevices(bool captured) {
  std::vector<ncclComm_t> comms(kDevices, nullptr);
  std::vector<int> devices(kDevices);
  for (int d = 0; d < kDevices; ++d) devices[d] = d;
  RANK_CHECK(ncclCommInitAll(comms.data(), kDevices, devices.data()) == ncclSuccess, "ncclCommInitAll: %s",
             lastError().c_str());
  std::vector<Rank> ranks(kDevices);
  for (int r = 0; r < kDevices; ++r) RANK_CHECK(ranks[r].make(devices[r]), "rank %d's buffers", r);
  for (int current : {0, 7})
    if (everyCallInOneGroup(comms, ranks, current) != 0) return 1;
  if (captured && capturedOverEightDevices(comms, ranks) != 0) return 1;
  for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
  for (Rank& k : ranks) k.release();
  return 0;
}

}  // namespace

TEST_CASE("one thread drives 8 fake GPUs from ncclCommInitAll: every collective, a send/receive ring and AllToAll "
          "in one group are exact with device 0 or device 7 left current, and so are captured ones",
          "[device][devices]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return oneThreadOverEightDevices(true); },
                              nodeOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("one thread drives 8 fake GPUs whose collectives stage through host memory, exact with device 0 or 7 "
          "left current",
          "[device][devices]") {
  // Staged calls cannot be captured (a graph cannot hold their host waits).
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return oneThreadOverEightDevices(false); },
                              nodeOptions("staged"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks in processes of their own, one fake GPU each, make contexts on their own GPU only, watchdogs "
          "included",
          "[device][devices]") {
  RunResult result = runRanks(4, [](int rank, int nranks, const ncclUniqueId& id) {
    const int device = rank + 1;  // no rank owns device 0, where a forgotten cudaSetDevice lands
    RANK_CHECK(gyre::fakeContextDevices() == 0, "contexts before the rank started: %#x", gyre::fakeContextDevices());
    RANK_CHECK(rt()->setDevice(device) == ncclSuccess, "cudaSetDevice(%d)", device);
    ncclComm_t comm = nullptr;
    RANK_CHECK(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
    Rank k;
    RANK_CHECK(k.make(device), "buffers");
    for (size_t i = 0; i < kCount * nranks; ++i) k.in[i] = valueOf(rank, i);
    RANK_CHECK(ncclAllReduce(k.in, k.sum, kCount, ncclInt32, ncclSum, comm, k.stream) == ncclSuccess,
               "AllReduce: %s", lastError().c_str());
    RANK_CHECK(ncclGroupStart() == ncclSuccess && ncclSend(k.in, kCount, ncclInt32, (rank + 1) % nranks, comm,
                                                           k.stream) == ncclSuccess &&
                   ncclRecv(k.ring, kCount, ncclInt32, (rank + nranks - 1) % nranks, comm, k.stream) == ncclSuccess &&
                   ncclGroupEnd() == ncclSuccess,
               "send/recv ring: %s", lastError().c_str());
    RANK_CHECK(rt()->streamSynchronize(k.stream) == ncclSuccess, "stream: %s", lastError().c_str());
    // The watchdogs poll every 100 ms: a few rounds, with events to query.
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    RANK_CHECK(async == ncclSuccess, "async error: %s", lastError().c_str());
    for (size_t i = 0; i < kCount; ++i) {
      int32_t sum = 0;
      for (int p = 0; p < nranks; ++p) sum += valueOf(p, i);
      RANK_CHECK(k.sum[i] == sum, "AllReduce element %zu is %d, not %d", i, k.sum[i], sum);
      const int prev = (rank + nranks - 1) % nranks;
      RANK_CHECK(k.ring[i] == valueOf(prev, i), "element %zu from rank %d is %d", i, prev, k.ring[i]);
    }
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
    k.release();
    RANK_CHECK(gyre::fakeContextDevices() == (1u << device),
               "the process of device %d made contexts on devices %#x (bit d: device d)", device,
               gyre::fakeContextDevices());
    return 0;
  }, nodeOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}
