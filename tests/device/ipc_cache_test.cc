// The receiver's cache of senders' buffers mapped by CUDA IPC
// (src/device/copy/ipc_mapping_cache.h), between two processes on the fake
// CUDA runtime, which counts the handles opened and the mappings held:
// one open per buffer however often it is sent, no more mappings than
// GYRE_IPC_CACHE_ENTRIES however many buffers are sent, and a buffer freed
// and allocated again is mapped afresh, never read through the old mapping.
#include <cstdint>
#include <string>
#include <vector>

#include "coll_common.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

gyre::DeviceRuntime* rt() { return gyre::deviceRuntime(); }

RankOptions cacheOptions(const char* entries) {
  RankOptions o;
  o.timeout_s = 60;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"},
           {"GYRE_IPC_CACHE_ENTRIES", entries}};
  return o;
}

// Larger than the fake's small allocations (1 MiB), so each buffer is a
// block of its own, as CUDA IPC maps them.
constexpr size_t kCount = 300 * 1024;

int32_t* deviceInts(size_t count, int32_t value) {
  void* p = nullptr;
  if (rt()->deviceAlloc(count * sizeof(int32_t), &p) != ncclSuccess) return nullptr;
  auto* ints = static_cast<int32_t*>(p);
  for (size_t i = 0; i < count; ++i) ints[i] = value + int32_t(i % 7);
  return ints;
}

std::string firstWrong(const int32_t* got, int32_t value) {
  for (size_t i = 0; i < kCount; ++i)
    if (got[i] != value + int32_t(i % 7))
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", sent " +
             std::to_string(value + int32_t(i % 7));
  return "";
}

// Rank 0 sends `values.size()` times, from buffers[k] holding values[k];
// rank 1 receives each into one buffer, after each checking the data and
// calling `afterEach(k)`.
struct Exchange {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

Exchange start(int rank, int n, const ncclUniqueId& id) {
  Exchange x;
  rt()->streamCreate(&x.stream);
  ncclCommInitRank(&x.comm, n, id, rank);
  return x;
}

}  // namespace

TEST_CASE("a send buffer sent again and again is opened by CUDA IPC once on the receiver", "[device][p2p][ipc]") {
  RunResult result = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    Exchange x = start(rank, n, id);
    RANK_CHECK(x.comm, "init: %s", lastError().c_str());
    int32_t* buffer = deviceInts(kCount, rank == 0 ? 100 : -1);
    RANK_CHECK(buffer, "alloc");
    const int64_t opensBefore = gyre::fakeIpcOpens();
    for (int k = 0; k < 5; ++k) {
      if (rank == 0) {
        RANK_CHECK(ncclSend(buffer, kCount, ncclInt32, 1, x.comm, x.stream) == ncclSuccess, "send %d: %s", k,
                   lastError().c_str());
      } else {
        RANK_CHECK(ncclRecv(buffer, kCount, ncclInt32, 0, x.comm, x.stream) == ncclSuccess, "recv %d: %s", k,
                   lastError().c_str());
      }
      RANK_CHECK(rt()->streamSynchronize(x.stream) == ncclSuccess, "sync: %s", lastError().c_str());
      if (rank == 1) {
        const std::string wrong = firstWrong(buffer, 100);
        RANK_CHECK(wrong.empty(), "receive %d: %s", k, wrong.c_str());
      }
    }
    if (rank == 1) {
      const int64_t opens = gyre::fakeIpcOpens() - opensBefore;
      RANK_CHECK(opens == 1, "5 sends of one buffer opened %lld CUDA IPC handles", (long long)opens);
    }
    RANK_CHECK(ncclCommDestroy(x.comm) == ncclSuccess, "destroy: %s", lastError().c_str());
    return 0;
  }, cacheOptions("64"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("twelve distinct send buffers leave at most GYRE_IPC_CACHE_ENTRIES=4 of them mapped on the receiver",
          "[device][p2p][ipc]") {
  RunResult result = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    const int64_t mappedBeforeInit = gyre::fakeHoldings().ipcMappings;
    Exchange x = start(rank, n, id);
    RANK_CHECK(x.comm, "init: %s", lastError().c_str());
    const int kBuffers = 12;
    std::vector<int32_t*> sends;
    int32_t* recv = rank == 1 ? deviceInts(kCount, -1) : nullptr;
    if (rank == 0)
      for (int k = 0; k < kBuffers; ++k) {
        sends.push_back(deviceInts(kCount, 1000 * (k + 1)));
        RANK_CHECK(sends.back(), "alloc %d", k);
      }
    const gyre::FakeHoldings before = gyre::fakeHoldings();
    const int64_t opensBefore = gyre::fakeIpcOpens();
    int64_t most = 0;
    for (int k = 0; k < kBuffers; ++k) {
      if (rank == 0) {
        RANK_CHECK(ncclSend(sends[k], kCount, ncclInt32, 1, x.comm, x.stream) == ncclSuccess, "send %d: %s", k,
                   lastError().c_str());
      } else {
        RANK_CHECK(ncclRecv(recv, kCount, ncclInt32, 0, x.comm, x.stream) == ncclSuccess, "recv %d: %s", k,
                   lastError().c_str());
      }
      RANK_CHECK(rt()->streamSynchronize(x.stream) == ncclSuccess, "sync: %s", lastError().c_str());
      if (rank == 1) {
        const std::string wrong = firstWrong(recv, 1000 * (k + 1));
        RANK_CHECK(wrong.empty(), "receive %d: %s", k, wrong.c_str());
        most = std::max(most, gyre::fakeHoldings().ipcMappings - before.ipcMappings);
      }
    }
    if (rank == 1) {
      RANK_CHECK(most <= 4, "the receiver held %lld senders' buffers mapped at once (GYRE_IPC_CACHE_ENTRIES=4)",
                 (long long)most);
      const int64_t opens = gyre::fakeIpcOpens() - opensBefore;
      RANK_CHECK(opens == kBuffers, "%d distinct buffers opened %lld handles", kBuffers, (long long)opens);
    }
    RANK_CHECK(ncclCommDestroy(x.comm) == ncclSuccess, "destroy: %s", lastError().c_str());
    RANK_CHECK(gyre::fakeHoldings().ipcMappings == mappedBeforeInit, "%lld mappings left after destroy",
               (long long)(gyre::fakeHoldings().ipcMappings - mappedBeforeInit));
    return 0;
  }, cacheOptions("4"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a send buffer freed and allocated again is mapped afresh, and its new contents arrive",
          "[device][p2p][ipc]") {
  RunResult result = runRanks(2, [](int rank, int n, const ncclUniqueId& id) {
    Exchange x = start(rank, n, id);
    RANK_CHECK(x.comm, "init: %s", lastError().c_str());
    int32_t* recv = rank == 1 ? deviceInts(kCount, -1) : nullptr;
    const int64_t opensBefore = gyre::fakeIpcOpens();
    for (int round = 0; round < 2; ++round) {
      const int32_t value = round == 0 ? 7000 : 9000;
      int32_t* send = rank == 0 ? deviceInts(kCount, value) : nullptr;
      if (rank == 0) {
        RANK_CHECK(send, "alloc");
        RANK_CHECK(ncclSend(send, kCount, ncclInt32, 1, x.comm, x.stream) == ncclSuccess, "send: %s",
                   lastError().c_str());
      } else {
        RANK_CHECK(ncclRecv(recv, kCount, ncclInt32, 0, x.comm, x.stream) == ncclSuccess, "recv: %s",
                   lastError().c_str());
      }
      RANK_CHECK(rt()->streamSynchronize(x.stream) == ncclSuccess, "sync: %s", lastError().c_str());
      if (rank == 0) RANK_CHECK(rt()->deviceFree(send) == ncclSuccess, "free: %s", lastError().c_str());
      if (rank == 1) {
        const std::string wrong = firstWrong(recv, value);
        RANK_CHECK(wrong.empty(), "round %d: %s", round, wrong.c_str());
      }
    }
    if (rank == 1) {
      const int64_t opens = gyre::fakeIpcOpens() - opensBefore;
      RANK_CHECK(opens == 2, "a buffer freed and allocated again was opened %lld times (2 allocations)",
                 (long long)opens);
    }
    RANK_CHECK(ncclCommDestroy(x.comm) == ncclSuccess, "destroy: %s", lastError().c_str());
    return 0;
  }, cacheOptions("64"));
  INFO(result.describe());
  CHECK(result.allOk());
}
