// Ranks of one process on different GPUs (ncclCommInitAll over several
// devices, nccl-tests -g) on the fake CUDA runtime, which holds them to the
// driver's rule: a kernel on one device touches another device's memory
// only after cudaDeviceEnablePeerAccess, else it faults with an illegal
// address that breaks the context for good (tests/support/fake_cuda/
// fake_devices.h). Every buffer and stream lives on its rank's device, as
// on a GPU. The rule is tested on the fake itself first; then collectives
// as kernels, sends and receives eager and captured, and windows, each
// with exact results and an unbroken context.
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/comm/executor_binding.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "tests/support/fake_cuda/fake_devices.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

RankOptions peerOptions(const char* path = nullptr) {
  RankOptions o;
  o.timeout_s = 120;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}};
  if (path) o.env.push_back({"GYRE_DEVICE_PATH", path});
  return o;
}

gyre::DeviceRuntime* rt() { return gyre::deviceRuntime(); }

// Device memory and a stream of one device, made with it current.
struct OnDevice {
  explicit OnDevice(int device) : device(device) {}
  void* alloc(size_t bytes) {
    void* p = nullptr;
    rt()->setDevice(device);
    if (rt()->deviceAlloc(bytes, &p) == ncclSuccess) owned.push_back(p);
    return p;
  }
  cudaStream_t stream() {
    if (!s) {
      rt()->setDevice(device);
      rt()->streamCreate(&s);
    }
    return s;
  }
  ~OnDevice() {
    for (void* p : owned) rt()->deviceFree(p);
    if (s) rt()->streamDestroy(s);
  }
  int device;
  std::vector<void*> owned;
  cudaStream_t s = nullptr;
};

int32_t valueOf(int rank, size_t i) { return int32_t(rank * 7919 + int(i) * 13 + 1); }

std::string contextState() {
  return rt()->contextBroken() ? std::string("the context broke: ") + lastError() : std::string();
}

// Every rank's streams done, no asynchronous error, the context whole.
int settle(std::vector<ncclComm_t>& comms, std::vector<OnDevice>& ranks) {
  for (size_t r = 0; r < comms.size(); ++r) {
    RANK_CHECK(rt()->streamSynchronize(ranks[r].stream()) == ncclSuccess, "rank %zu's stream: %s", r,
               lastError().c_str());
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comms[r], &async);
    RANK_CHECK(async == ncclSuccess, "rank %zu: async error %d: %s", r, int(async), lastError().c_str());
  }
  RANK_CHECK(!rt()->contextBroken(), "%s", contextState().c_str());
  return 0;
}

int initOn(const std::vector<int>& devices, std::vector<ncclComm_t>* comms, std::vector<OnDevice>* ranks) {
  comms->assign(devices.size(), nullptr);
  for (int d : devices) ranks->emplace_back(d);
  RANK_CHECK(ncclCommInitAll(comms->data(), int(devices.size()), devices.data()) == ncclSuccess,
             "ncclCommInitAll: %s", lastError().c_str());
  return 0;
}

// AllReduce, AllGather, ReduceScatter and Broadcast of int32 sums, grouped
// over the ranks from one thread; each output against sums made here.
int collectivesOn(const std::vector<int>& devices) {
  const int n = static_cast<int>(devices.size());
  const size_t count = 1031;
  std::vector<ncclComm_t> comms;
  std::vector<OnDevice> ranks;
  ranks.reserve(n);
  if (initOn(devices, &comms, &ranks) != 0) return 1;
  for (int r = 0; r < n; ++r)
    RANK_CHECK(gyre::runsKernels(comms[r]), "rank %d does not run collectives as kernels", r);
  std::vector<int32_t*> in(n), sum(n), gathered(n), scattered(n), bcast(n);
  for (int r = 0; r < n; ++r) {
    OnDevice& d = ranks[r];
    in[r] = static_cast<int32_t*>(d.alloc(count * n * sizeof(int32_t)));
    sum[r] = static_cast<int32_t*>(d.alloc(count * sizeof(int32_t)));
    gathered[r] = static_cast<int32_t*>(d.alloc(count * n * sizeof(int32_t)));
    scattered[r] = static_cast<int32_t*>(d.alloc(count * sizeof(int32_t)));
    bcast[r] = static_cast<int32_t*>(d.alloc(count * sizeof(int32_t)));
    RANK_CHECK(gyre::fakeDeviceOf(in[r]) == devices[r], "rank %d's buffer is on device %d", r,
               gyre::fakeDeviceOf(in[r]));
    for (size_t i = 0; i < count * n; ++i) in[r][i] = valueOf(r, i);
  }
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r) {
    cudaStream_t s = ranks[r].stream();
    RANK_CHECK(ncclAllReduce(in[r], sum[r], count, ncclInt32, ncclSum, comms[r], s) == ncclSuccess &&
                   ncclAllGather(in[r], gathered[r], count, ncclInt32, comms[r], s) == ncclSuccess &&
                   ncclReduceScatter(in[r], scattered[r], count, ncclInt32, ncclSum, comms[r], s) == ncclSuccess &&
                   ncclBroadcast(in[r], bcast[r], count, ncclInt32, n - 1, comms[r], s) == ncclSuccess,
               "rank %d: %s", r, lastError().c_str());
  }
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  if (settle(comms, ranks) != 0) return 1;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i) {
      int32_t s = 0, block = 0;
      for (int p = 0; p < n; ++p) {
        s += valueOf(p, i);
        block += valueOf(p, r * count + i);
      }
      RANK_CHECK(sum[r][i] == s, "rank %d: allreduce element %zu is %d, not %d", r, i, sum[r][i], s);
      RANK_CHECK(scattered[r][i] == block, "rank %d: reducescatter element %zu is %d, not %d", r, i,
                 scattered[r][i], block);
      RANK_CHECK(bcast[r][i] == valueOf(n - 1, i), "rank %d: broadcast element %zu is %d", r, i, bcast[r][i]);
      for (int p = 0; p < n; ++p)
        RANK_CHECK(gathered[r][p * count + i] == valueOf(p, i), "rank %d: allgather block %d element %zu is %d", r,
                   p, i, gathered[r][p * count + i]);
    }
  for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

// Every rank sends every other rank `count` int32s, eagerly and then
// captured into a graph per rank launched twice; what arrives is what its
// sender held at that launch. With `capturedRefused` (GPUs that cannot reach
// each other's memory) the captured calls must be refused instead, naming
// why: they would stage through host functions, which a graph cannot hold.
int sendsOn(const std::vector<int>& devices, bool capturedRefused = false) {
  const int n = static_cast<int>(devices.size());
  const size_t count = 2053;
  std::vector<ncclComm_t> comms;
  std::vector<OnDevice> ranks;
  ranks.reserve(n);
  if (initOn(devices, &comms, &ranks) != 0) return 1;
  std::vector<int32_t*> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    send[r] = static_cast<int32_t*>(ranks[r].alloc(count * n * sizeof(int32_t)));
    recv[r] = static_cast<int32_t*>(ranks[r].alloc(count * n * sizeof(int32_t)));
  }
  auto enqueue = [&] {
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p) {
        if (p == r) continue;
        RANK_CHECK(ncclSend(send[r] + p * count, count, ncclInt32, p, comms[r], ranks[r].stream()) == ncclSuccess &&
                       ncclRecv(recv[r] + p * count, count, ncclInt32, p, comms[r], ranks[r].stream()) ==
                           ncclSuccess,
                   "rank %d with %d: %s", r, p, lastError().c_str());
      }
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
    return 0;
  };
  auto fill = [&](int launch) {
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count * n; ++i) {
        send[r][i] = valueOf(r, i) + launch * 100003;
        recv[r][i] = -1;
      }
  };
  auto check = [&](int launch) {
    if (settle(comms, ranks) != 0) return 1;
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; p != r && i < count; ++i)
          RANK_CHECK(recv[r][p * count + i] == valueOf(p, r * count + i) + launch * 100003,
                     "launch %d: rank %d's element %zu from rank %d is %d", launch, r, i, p, recv[r][p * count + i]);
    return 0;
  };
  fill(0);
  if (enqueue() != 0 || check(0) != 0) return 1;
  std::vector<gyre::FakeGraph> graphs(n);
  for (int r = 0; r < n; ++r) gyre::fakeBeginCapture(ranks[r].stream(), &graphs[r]);
  if (capturedRefused) {
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
    for (int r = 0; r < n; ++r) {
      const int p = (r + 1) % n;
      ncclSend(send[r], count, ncclInt32, p, comms[r], ranks[r].stream());
      ncclRecv(recv[r], count, ncclInt32, (r + n - 1) % n, comms[r], ranks[r].stream());
    }
    RANK_CHECK(ncclGroupEnd() != ncclSuccess, "captured sends between GPUs without peer access were accepted");
    RANK_CHECK(lastError().find("captured into a CUDA graph but would be staged") != std::string::npos,
               "the refusal does not say why: %s", lastError().c_str());
    for (int r = 0; r < n; ++r) gyre::fakeEndCapture(ranks[r].stream());
    for (ncclComm_t c : comms) ncclCommDestroy(c);
    return 0;
  }
  if (enqueue() != 0) return 1;
  for (int r = 0; r < n; ++r) gyre::fakeEndCapture(ranks[r].stream());
  for (int launch = 1; launch <= 2; ++launch) {
    fill(launch);
    for (int r = 0; r < n; ++r) gyre::fakeLaunchGraph(graphs[r], ranks[r].stream());
    if (check(launch) != 0) return 1;
  }
  for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

// Each rank registers a window in its own device's memory; a kernel of
// each rank (a thread with its device current) touches every peer's window
// through the LSA pointers the host API gives.
int windowsOn(const std::vector<int>& devices) {
  const int n = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms;
  std::vector<OnDevice> ranks;
  ranks.reserve(n);
  if (initOn(devices, &comms, &ranks) != 0) return 1;
  std::vector<void*> bufs(n, nullptr);
  std::vector<ncclWindow_t> wins(n, nullptr);
  for (int r = 0; r < n; ++r) {
    rt()->setDevice(devices[r]);
    RANK_CHECK(ncclMemAlloc(&bufs[r], 4096) == ncclSuccess, "ncclMemAlloc: %s", lastError().c_str());
    RANK_CHECK(gyre::fakeDeviceOf(bufs[r]) == devices[r], "rank %d's window is on device %d", r,
               gyre::fakeDeviceOf(bufs[r]));
  }
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r) ncclCommWindowRegister(comms[r], bufs[r], 4096, &wins[r], NCCL_WIN_COLL_SYMMETRIC);
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "window registration: %s", lastError().c_str());
  std::vector<std::string> wrong(n);
  std::vector<std::thread> kernels;
  for (int r = 0; r < n; ++r)
    kernels.emplace_back([&, r] {
      rt()->setDevice(devices[r]);
      for (int p = 0; p < n && wrong[r].empty(); ++p) {
        void* at = nullptr;
        if (ncclGetLsaDevicePointer(wins[r], 64, p, &at) != ncclSuccess)
          wrong[r] = "no LSA pointer to rank " + std::to_string(p);
        else if (!gyre::fakeKernelTouch(at))
          wrong[r] = lastError();
      }
    });
  for (auto& t : kernels) t.join();
  for (int r = 0; r < n; ++r) RANK_CHECK(wrong[r].empty(), "rank %d: %s", r, wrong[r].c_str());
  for (int r = 0; r < n; ++r) {
    RANK_CHECK(ncclCommWindowDeregister(comms[r], wins[r]) == ncclSuccess, "deregister: %s", lastError().c_str());
    RANK_CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy: %s", lastError().c_str());
    ncclMemFree(bufs[r]);
  }
  return 0;
}

}  // namespace

TEST_CASE("the fake faults a kernel touching another device's memory without peer access, stickily, and lets it "
          "once peer access is enabled (twice is no error); copies need none",
          "[device][peer]") {
  RunResult faulted = runRanks(1, [](int, int, const ncclUniqueId&) {
    OnDevice zero(0), one(1);
    auto* flag = static_cast<uint32_t*>(zero.alloc(sizeof(uint32_t)));
    RANK_CHECK(gyre::fakeDeviceOf(flag) == 0, "the flag is on device %d", gyre::fakeDeviceOf(flag));
    *flag = 0;
    gyre::FlagOps ops;
    ops.add(flag, 7, gyre::FlagOpKind::kWrite);
    RANK_CHECK(rt()->launchFlagOps(ops, one.stream()) == ncclSuccess, "launch: %s", lastError().c_str());
    RANK_CHECK(rt()->streamSynchronize(one.stream()) == ncclUnhandledCudaError, "the fault went unreported");
    const std::string text = lastError();
    RANK_CHECK(text.find("cudaErrorIllegalAddress") != std::string::npos &&
                   text.find("device 1") != std::string::npos && text.find("device 0") != std::string::npos,
               "the fault says: %s", text.c_str());
    RANK_CHECK(*flag == 0 && rt()->contextBroken(), "the faulting kernel wrote, or the context is whole");
    RANK_CHECK(rt()->streamSynchronize(zero.stream()) == ncclUnhandledCudaError,
               "the error is not sticky: another device's stream still succeeds");
    return 0;
  }, peerOptions());
  INFO(faulted.describe());
  CHECK(faulted.allOk());

  RunResult enabled = runRanks(1, [](int, int, const ncclUniqueId&) {
    OnDevice zero(0), one(1);
    auto* flag = static_cast<uint32_t*>(zero.alloc(sizeof(uint32_t)));
    auto* there = static_cast<uint32_t*>(one.alloc(sizeof(uint32_t)));
    *flag = 0;
    *there = 0;
    // A copy on device 1's stream between the two devices' memory.
    RANK_CHECK(rt()->copyAsync(there, flag, sizeof(uint32_t), one.stream()) == ncclSuccess &&
                   rt()->streamSynchronize(one.stream()) == ncclSuccess,
               "a copy between devices without peer access: %s", lastError().c_str());
    RANK_CHECK(rt()->enablePeerAccess(1, 0) == ncclSuccess && rt()->enablePeerAccess(1, 0) == ncclSuccess,
               "enabling peer access: %s", lastError().c_str());
    gyre::FlagOps ops;
    ops.add(flag, 7, gyre::FlagOpKind::kWrite);
    RANK_CHECK(rt()->launchFlagOps(ops, one.stream()) == ncclSuccess &&
                   rt()->streamSynchronize(one.stream()) == ncclSuccess,
               "with peer access: %s", lastError().c_str());
    RANK_CHECK(*flag == 7, "the flag holds %u", *flag);
    // One direction only: device 0 still cannot reach device 1.
    gyre::FlagOps back;
    back.add(there, 7, gyre::FlagOpKind::kWrite);
    RANK_CHECK(rt()->launchFlagOps(back, zero.stream()) == ncclSuccess, "launch: %s", lastError().c_str());
    RANK_CHECK(rt()->streamSynchronize(zero.stream()) == ncclUnhandledCudaError && *there == 0,
               "peer access from device 1 to 0 let device 0 reach device 1");
    return 0;
  }, peerOptions());
  INFO(enabled.describe());
  CHECK(enabled.allOk());
}

TEST_CASE("ranks of one process on three fake GPUs run AllReduce, AllGather, ReduceScatter and Broadcast as "
          "kernels, exact",
          "[device][peer]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return collectivesOn({0, 1, 2}); },
                              peerOptions("kernels"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process on three fake GPUs exchange sends and receives eagerly and from graphs, exact",
          "[device][peer]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return sendsOn({0, 1, 2}); }, peerOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process on three fake GPUs without native peer atomics (PCIe pairs) exchange sends and "
          "receives from graphs exact: the point-to-point kernel counts its blocks in its own GPU's memory",
          "[device][peer]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    gyre::fakeSetPeerAtomicsSupported(false);
    return sendsOn({0, 1, 2});
  }, peerOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process on two fake GPUs reach each other's windows from their kernels", "[device][peer]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return windowsOn({0, 1}); }, peerOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("fake GPUs without peer access: a second init is fine, collectives and sends stage exactly, captured "
          "sends are refused naming why, and forcing kernels fails at init",
          "[device][peer]") {
  RunResult staged = runRanks(1, [](int, int, const ncclUniqueId&) {
    gyre::fakeSetPeerAccessSupported(false);
    if (sendsOn({0, 1}, /*capturedRefused=*/true) != 0) return 1;
    std::vector<ncclComm_t> comms;
    std::vector<OnDevice> ranks;
    ranks.reserve(2);
    if (initOn({0, 1}, &comms, &ranks) != 0) return 1;
    for (int r = 0; r < 2; ++r) RANK_CHECK(!gyre::runsKernels(comms[r]), "rank %d runs kernels", r);
    for (ncclComm_t c : comms) ncclCommDestroy(c);
    return 0;
  }, peerOptions());
  INFO(staged.describe());
  CHECK(staged.allOk());

  RunResult forced = runRanks(1, [](int, int, const ncclUniqueId&) {
    gyre::fakeSetPeerAccessSupported(false);
    std::vector<ncclComm_t> comms(2, nullptr);
    int devices[2] = {0, 1};
    RANK_CHECK(ncclCommInitAll(comms.data(), 2, devices) != ncclSuccess, "kernels without peer access initialised");
    RANK_CHECK(!lastError().empty(), "no message");
    return 0;
  }, peerOptions("kernels"));
  INFO(forced.describe());
  CHECK(forced.allOk());
}

TEST_CASE("two communicators over the same fake GPUs of one process: enabling peer access again is no error",
          "[device][peer]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    std::vector<ncclComm_t> first;
    std::vector<OnDevice> ranks;
    ranks.reserve(2);
    if (initOn({0, 1}, &first, &ranks) != 0) return 1;
    if (collectivesOn({0, 1}) != 0) return 1;
    for (ncclComm_t c : first) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
    return 0;
  }, peerOptions("kernels"));
  INFO(result.describe());
  CHECK(result.allOk());
}
