// Registered windows on the data paths, on the fake CUDA runtime: a send
// from a window, and a direct collective on windows, find the peers'
// buffers through the mappings registration made (src/device/peer_windows.h)
// instead of describing and opening an allocation per call; results are
// checked against the values sent, and the counters say the window was used.
#include <cstring>
#include <string>
#include <vector>

#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/device_comm.h"
#include "src/device/direct/direct_calls.h"
#include "src/device/runtime/runtime.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }
void sync(cudaStream_t s) { gyre::deviceRuntime()->streamSynchronize(s); }

RankOptions windowOptions(const char* path) {
  RankOptions o;
  o.timeout_s = 120;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}};
  if (path) o.env.push_back({"GYRE_DEVICE_PATH", path});
  return o;
}

float valueAt(int rank, int round, size_t i) { return float(rank * 1000 + round * 17 + int(i % 251)); }

}  // namespace

TEST_CASE("sends from a registered window reach processes by CUDA IPC without a handle per call",
          "[device][p2p][ipc][windows]") {
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
        const size_t count = 4099, bytes = count * sizeof(float) * n;
        void* buf = nullptr;
        RANK_CHECK(ncclMemAlloc(&buf, 2 * bytes) == ncclSuccess, "ncclMemAlloc: %s", lastError().c_str());
        ncclWindow_t win = nullptr;
        RANK_CHECK(ncclCommWindowRegister(comm, buf, 2 * bytes, &win, NCCL_WIN_DEFAULT) == ncclSuccess,
                   "register: %s", lastError().c_str());
        float* send = static_cast<float*>(buf);
        float* recv = send + count * n;  // the window's second half
        cudaStream_t s = fakeStream(900);
        for (int round = 0; round < 2; ++round) {
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i) send[p * count + i] = valueAt(rank, round, i) + p;
          std::fill(recv, recv + count * n, -1.0f);
          RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
          for (int p = 0; p < n; ++p) {
            RANK_CHECK(ncclSend(send + p * count, count, ncclFloat32, p, comm, s) == ncclSuccess, "send: %s",
                       lastError().c_str());
            RANK_CHECK(ncclRecv(recv + p * count, count, ncclFloat32, p, comm, s) == ncclSuccess, "recv: %s",
                       lastError().c_str());
          }
          RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
          sync(s);
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i)
              RANK_CHECK(recv[p * count + i] == valueAt(p, round, i) + rank, "round %d: element %zu from rank %d is %g",
                         round, i, p, recv[p * count + i]);
          RANK_CHECK(ncclAllReduce(recv, recv, 1, ncclFloat32, ncclSum, comm, fakeStream(901)) == ncclSuccess,
                     "barrier: %s", lastError().c_str());
          sync(fakeStream(901));
        }
        const uint64_t windowed = comm->device->copies->ipc->windowed.load();
        RANK_CHECK(windowed == 2 * uint64_t(n - 1), "rank %d: %llu receives found their sender's window", rank,
                   (unsigned long long)windowed);
        RANK_CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister: %s", lastError().c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        ncclMemFree(buf);
        return 0;
      },
      windowOptions(nullptr));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("direct collectives of processes on registered windows find the peers' buffers there",
          "[device][direct][windows]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
        RANK_CHECK(comm->device->direct != nullptr, "the direct path is not set up");
        const size_t count = 10007;
        void* buf = nullptr;
        RANK_CHECK(ncclMemAlloc(&buf, 2 * count * sizeof(float)) == ncclSuccess, "ncclMemAlloc: %s",
                   lastError().c_str());
        ncclWindow_t win = nullptr;
        RANK_CHECK(ncclCommWindowRegister(comm, buf, 2 * count * sizeof(float), &win, NCCL_WIN_COLL_SYMMETRIC) ==
                       ncclSuccess, "register: %s", lastError().c_str());
        float* in = static_cast<float*>(buf);
        float* out = in + count;
        for (size_t i = 0; i < count; ++i) in[i] = valueAt(rank, 0, i);
        RANK_CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, fakeStream(910)) == ncclSuccess,
                   "allreduce: %s", lastError().c_str());
        sync(fakeStream(910));
        for (size_t i = 0; i < count; ++i) {
          float want = 0;
          for (int p = 0; p < n; ++p) want += valueAt(p, 0, i);
          RANK_CHECK(out[i] == want, "element %zu is %g, not %g", i, out[i], want);
        }
        // Rank 0 runs every rank's share (GYRE_DIRECT_LEADER's default); the others only signal.
        if (rank == 0)
          RANK_CHECK(comm->device->direct->windowed.load() > 0, "no peer buffer came from a window");
        RANK_CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister: %s", lastError().c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        ncclMemFree(buf);
        return 0;
      },
      windowOptions("direct"));
  INFO(result.describe());
  CHECK(result.allOk());
}
