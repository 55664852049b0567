// CUDA graph capture on device communicators, on the fake CUDA runtime:
// captured sends, receives and collectives take the same copy and direct
// paths as eager ones, and every launch of the graphs moves the data the
// buffers hold at that launch. Each rank captures its own stream into its
// own graph in Global mode, as nccl-tests and PyTorch do, under CUDA's
// capture rules (a call that broke the capture makes its end fail); the
// graphs of a pair meet through flags that each side clears after its wait
// (src/device/flag_ops.h).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/device_comm.h"
#include "src/device/direct/direct_calls.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "src/device/runtime/runtime.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;
using gyre::P2PPath;

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }
void sync(cudaStream_t s) { gyre::deviceRuntime()->streamSynchronize(s); }

RankOptions graphOptions() {
  RankOptions o;
  o.timeout_s = 120;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}};
  return o;
}

// `n` ranks of this process on fake device 0 (ncclCommInitAll).
bool ranksOfOneGpu(int n, std::vector<ncclComm_t>* comms) {
  std::vector<int> devs(n, 0);
  comms->assign(n, nullptr);
  return ncclCommInitAll(comms->data(), n, devs.data()) == ncclSuccess;
}

uint64_t pathCount(ncclComm_t comm, P2PPath p) { return comm->device->copies->calls[static_cast<int>(p)].load(); }

// Device memory of the fake (the only kind CUDA IPC shares).
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes) { gyre::deviceRuntime()->deviceAlloc(bytes ? bytes : 1, &p); }
  ~DeviceBuffer() { gyre::deviceRuntime()->deviceFree(p); }
  template <typename T>
  T* as() { return static_cast<T*>(p); }
  void* p = nullptr;
};

// What rank `from` sends rank `to` at graph launch `launch`.
int32_t sent(int from, int to, int launch, size_t i) {
  return int32_t(from * 1000003 + to * 7919 + launch * 104729 + int(i) * 13);
}

}  // namespace

TEST_CASE("processes on one GPU replay captured sends and receives by CUDA IPC copies, AlltoAll in place too",
          "[device][p2p][graph][ipc]") {
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
        const size_t count = 1009;
        DeviceBuffer send(count * n * 4), recv(count * n * 4), inPlace(count * n * 4);
        cudaStream_t s = fakeStream(700);
        gyre::FakeGraph graph;
        gyre::fakeBeginCapture(s, &graph);
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int p = 0; p < n; ++p) {
          RANK_CHECK(ncclSend(send.as<int32_t>() + p * count, count, ncclInt32, p, comm, s) == ncclSuccess,
                     "captured send: %s", lastError().c_str());
          RANK_CHECK(ncclRecv(recv.as<int32_t>() + p * count, count, ncclInt32, p, comm, s) == ncclSuccess,
                     "captured recv: %s", lastError().c_str());
        }
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        RANK_CHECK(ncclAlltoAll(inPlace.p, inPlace.p, count, ncclInt32, comm, s) == ncclSuccess,
                   "captured in-place alltoall: %s", lastError().c_str());
        RANK_CHECK(gyre::fakeEndCapture(s) == 0, "end capture: %s", lastError().c_str());
        RANK_CHECK(pathCount(comm, P2PPath::Staged) == 0, "rank %d staged %llu captured calls", rank,
                   (unsigned long long)pathCount(comm, P2PPath::Staged));
        RANK_CHECK(pathCount(comm, P2PPath::IpcCopy) == 4 * uint64_t(n - 1), "rank %d: %llu IPC copies captured",
                   rank, (unsigned long long)pathCount(comm, P2PPath::IpcCopy));
        for (int launch = 0; launch < 3; ++launch) {
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i) {
              send.as<int32_t>()[p * count + i] = sent(rank, p, launch, i);
              inPlace.as<int32_t>()[p * count + i] = -sent(rank, p, launch, i);
              recv.as<int32_t>()[p * count + i] = -1;
            }
          gyre::fakeLaunchGraph(graph, s);
          sync(s);
          for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < count; ++i) {
              RANK_CHECK(recv.as<int32_t>()[p * count + i] == sent(p, rank, launch, i),
                         "launch %d: rank %d's element %zu from rank %d is %d", launch, rank, i, p,
                         recv.as<int32_t>()[p * count + i]);
              RANK_CHECK(inPlace.as<int32_t>()[p * count + i] == -sent(p, rank, launch, i),
                         "launch %d: in-place alltoall, rank %d's element %zu from rank %d is %d", launch, rank, i,
                         p, inPlace.as<int32_t>()[p * count + i]);
            }
          // The peers refill their buffers for the next launch only after
          // every rank checked this one.
          RANK_CHECK(ncclAllReduce(send.p, send.p, 1, ncclInt32, ncclSum, comm, fakeStream(701)) == ncclSuccess,
                     "barrier: %s", lastError().c_str());
          sync(fakeStream(701));
        }
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      graphOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a receive captured into a graph whose peer process's send is not fails clearly on the receiver",
          "[device][p2p][graph][ipc][faults]") {
  RankOptions o = graphOptions();
  o.env.push_back({"GYRE_TIMEOUT", "3"});
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
        DeviceBuffer b(4096);
        cudaStream_t s = fakeStream(710);
        if (rank == 0) {
          RANK_CHECK(ncclSend(b.p, 1024, ncclFloat32, 1, comm, s) == ncclSuccess, "eager send: %s",
                     lastError().c_str());
        } else {
          gyre::FakeGraph graph;
          gyre::fakeBeginCapture(s, &graph);
          ncclResult_t r = ncclRecv(b.p, 1024, ncclFloat32, 0, comm, s);
          gyre::fakeEndCapture(s);
          std::string text = lastError();
          RANK_CHECK(r != ncclSuccess, "a captured receive matched an uncaptured send");
          RANK_CHECK(text.find("capture alike") != std::string::npos && text.find("rank 0") != std::string::npos,
                     "unclear error: %s", text.c_str());
        }
        ncclCommAbort(comm);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process on one GPU, each captured into its own graph, exchange by the point-to-point "
          "kernel at every launch",
          "[device][p2p][graph]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        const int n = 3;
        std::vector<ncclComm_t> comms;
        RANK_CHECK(ranksOfOneGpu(n, &comms), "init: %s", lastError().c_str());
        const size_t count = 4099;
        std::vector<std::vector<int32_t>> send(n), recv(n), inPlace(n);
        std::vector<gyre::FakeGraph> graphs(n);
        for (int r = 0; r < n; ++r) {
          send[r].assign(count * n, 0);
          recv[r].assign(count * n, -1);
          inPlace[r].assign(count * n, 0);
          gyre::fakeBeginCapture(fakeStream(720 + r), &graphs[r]);
        }
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < n; ++r)
          for (int p = 0; p < n; ++p) {
            RANK_CHECK(ncclSend(send[r].data() + p * count, count, ncclInt32, p, comms[r], fakeStream(720 + r)) ==
                           ncclSuccess, "captured send %d->%d: %s", r, p, lastError().c_str());
            RANK_CHECK(ncclRecv(recv[r].data() + p * count, count, ncclInt32, p, comms[r], fakeStream(720 + r)) ==
                           ncclSuccess, "captured recv %d<-%d: %s", r, p, lastError().c_str());
          }
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < n; ++r)
          RANK_CHECK(ncclAlltoAll(inPlace[r].data(), inPlace[r].data(), count, ncclInt32, comms[r],
                                  fakeStream(720 + r)) == ncclSuccess, "captured in-place alltoall: %s",
                     lastError().c_str());
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        for (int r = 0; r < n; ++r)
          RANK_CHECK(gyre::fakeEndCapture(fakeStream(720 + r)) == 0, "end capture: %s", lastError().c_str());
        for (int r = 0; r < n; ++r) {
          sync(fakeStream(720 + r));
          RANK_CHECK(recv[r][0] == -1, "rank %d: the captured exchange ran before the graphs were launched", r);
          RANK_CHECK(pathCount(comms[r], P2PPath::Staged) == 0 && pathCount(comms[r], P2PPath::ProcessCopy) == 0,
                     "rank %d: %llu staged, %llu eager copies", r,
                     (unsigned long long)pathCount(comms[r], P2PPath::Staged),
                     (unsigned long long)pathCount(comms[r], P2PPath::ProcessCopy));
          RANK_CHECK(pathCount(comms[r], P2PPath::KernelCopy) == 4 * uint64_t(n - 1),
                     "rank %d: %llu kernel copies captured", r,
                     (unsigned long long)pathCount(comms[r], P2PPath::KernelCopy));
        }
        for (int launch = 0; launch < 3; ++launch) {
          for (int r = 0; r < n; ++r)
            for (int p = 0; p < n; ++p)
              for (size_t i = 0; i < count; ++i) {
                send[r][p * count + i] = sent(r, p, launch, i);
                inPlace[r][p * count + i] = -sent(r, p, launch, i);
                recv[r][p * count + i] = -1;
              }
          for (int r = 0; r < n; ++r) gyre::fakeLaunchGraph(graphs[r], fakeStream(720 + r));
          for (int r = 0; r < n; ++r) sync(fakeStream(720 + r));
          for (int r = 0; r < n; ++r)
            for (int p = 0; p < n; ++p)
              for (size_t i = 0; i < count; ++i) {
                RANK_CHECK(recv[r][p * count + i] == sent(p, r, launch, i),
                           "launch %d: rank %d's element %zu from rank %d is %d", launch, r, i, p,
                           recv[r][p * count + i]);
                RANK_CHECK(inPlace[r][p * count + i] == -sent(p, r, launch, i),
                           "launch %d: in-place alltoall, rank %d's element %zu from rank %d is %d", launch, r, i, p,
                           inPlace[r][p * count + i]);
              }
        }
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      graphOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("processes on one GPU replay captured AllReduce and AllGather on the direct path", "[device][graph][direct]") {
  RankOptions o = graphOptions();
  o.env.push_back({"GYRE_DEVICE_PATH", "direct"});
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
        RANK_CHECK(comm->device->direct != nullptr, "rank %d: the direct path is not set up", rank);
        const size_t count = 1031;
        DeviceBuffer in(count * 4), sum(count * 4), gathered(count * n * 4);
        cudaStream_t s = fakeStream(730);
        const uint64_t before = comm->device->direct->callsRun.load();
        gyre::FakeGraph graph;
        gyre::fakeBeginCapture(s, &graph);
        RANK_CHECK(ncclAllReduce(in.p, sum.p, count, ncclInt32, ncclSum, comm, s) == ncclSuccess,
                   "captured allreduce: %s", lastError().c_str());
        RANK_CHECK(ncclAllGather(in.p, gathered.p, count, ncclInt32, comm, s) == ncclSuccess,
                   "captured allgather: %s", lastError().c_str());
        RANK_CHECK(gyre::fakeEndCapture(s) == 0, "end capture: %s", lastError().c_str());
        RANK_CHECK(comm->device->direct->callsRun.load() == before + 2, "rank %d: %llu of 2 captured calls run direct",
                   rank, (unsigned long long)(comm->device->direct->callsRun.load() - before));
        for (int launch = 0; launch < 3; ++launch) {
          for (size_t i = 0; i < count; ++i) in.as<int32_t>()[i] = sent(rank, 0, launch, i);
          memset(sum.p, 0xff, count * 4);
          memset(gathered.p, 0xff, count * n * 4);
          gyre::fakeLaunchGraph(graph, s);
          sync(s);
          for (size_t i = 0; i < count; ++i) {
            int32_t want = 0;
            for (int p = 0; p < n; ++p) want += sent(p, 0, launch, i);
            RANK_CHECK(sum.as<int32_t>()[i] == want, "launch %d: rank %d's sum at %zu is %d, not %d", launch, rank, i,
                       sum.as<int32_t>()[i], want);
            for (int p = 0; p < n; ++p)
              RANK_CHECK(gathered.as<int32_t>()[p * count + i] == sent(p, 0, launch, i),
                         "launch %d: rank %d's gathered block %d at %zu is %d", launch, rank, p, i,
                         gathered.as<int32_t>()[p * count + i]);
          }
          // Peers refill their inputs for the next launch only after every rank checked this one.
          RANK_CHECK(ncclAllReduce(sum.p, sum.p, 1, ncclInt32, ncclSum, comm, fakeStream(731)) == ncclSuccess,
                     "barrier: %s", lastError().c_str());
          sync(fakeStream(731));
        }
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process on one GPU, each captured into its own graph, replay AllReduce and ReduceScatter "
          "on the direct path",
          "[device][graph][direct]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        const int n = 3;
        std::vector<ncclComm_t> comms;
        RANK_CHECK(ranksOfOneGpu(n, &comms), "init: %s", lastError().c_str());
        RANK_CHECK(comms[0]->device->direct && comms[0]->device->direct->clique,
                   "ranks of one process do not run direct");
        const size_t count = 997;
        std::vector<std::vector<float>> in(n), sum(n), scattered(n);
        std::vector<gyre::FakeGraph> graphs(n);
        std::vector<uint64_t> before(n);
        for (int r = 0; r < n; ++r) {
          in[r].assign(count * n, 0);
          sum[r].assign(count * n, -1);
          scattered[r].assign(count, -1);
          before[r] = comms[r]->device->direct->callsRun.load();
          gyre::fakeBeginCapture(fakeStream(740 + r), &graphs[r]);
        }
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < n; ++r) {
          RANK_CHECK(ncclAllReduce(in[r].data(), sum[r].data(), count * n, ncclFloat32, ncclSum, comms[r],
                                   fakeStream(740 + r)) == ncclSuccess, "captured allreduce: %s", lastError().c_str());
          RANK_CHECK(ncclReduceScatter(in[r].data(), scattered[r].data(), count, ncclFloat32, ncclMax, comms[r],
                                       fakeStream(740 + r)) == ncclSuccess, "captured reducescatter: %s",
                     lastError().c_str());
        }
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        for (int r = 0; r < n; ++r) {
          RANK_CHECK(gyre::fakeEndCapture(fakeStream(740 + r)) == 0, "end capture: %s", lastError().c_str());
          RANK_CHECK(comms[r]->device->direct->callsRun.load() == before[r] + 2,
                     "rank %d: %llu of 2 captured calls ran direct", r,
                     (unsigned long long)(comms[r]->device->direct->callsRun.load() - before[r]));
        }
        for (int launch = 0; launch < 3; ++launch) {
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count * n; ++i) in[r][i] = float(sent(r, 0, launch, i) % 4096);
          for (int r = 0; r < n; ++r) gyre::fakeLaunchGraph(graphs[r], fakeStream(740 + r));
          for (int r = 0; r < n; ++r) sync(fakeStream(740 + r));
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count * n; ++i) {
              float want = 0, top = in[0][i];
              for (int p = 0; p < n; ++p) want += in[p][i], top = std::max(top, in[p][i]);
              RANK_CHECK(sum[r][i] == want, "launch %d: rank %d's sum at %zu is %g, not %g", launch, r, i, sum[r][i],
                         want);
              if (i / count == size_t(r))
                RANK_CHECK(scattered[r][i % count] == top, "launch %d: rank %d's max at %zu is %g, not %g", launch, r,
                           i % count, scattered[r][i % count], top);
            }
        }
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      graphOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a captured group mixing AllReduce with sends and receives replays right on ranks of one process",
          "[device][graph][p2p][direct]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        const int n = 2;
        std::vector<ncclComm_t> comms;
        RANK_CHECK(ranksOfOneGpu(n, &comms), "init: %s", lastError().c_str());
        const size_t count = 613;
        std::vector<std::vector<int32_t>> in(n), sum(n), got(n);
        std::vector<gyre::FakeGraph> graphs(n);
        for (int r = 0; r < n; ++r) {
          in[r].assign(count, 0);
          sum[r].assign(count, -1);
          got[r].assign(count, -1);
          gyre::fakeBeginCapture(fakeStream(750 + r), &graphs[r]);
        }
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < n; ++r) {
          cudaStream_t s = fakeStream(750 + r);
          RANK_CHECK(ncclAllReduce(in[r].data(), sum[r].data(), count, ncclInt32, ncclSum, comms[r], s) ==
                         ncclSuccess, "captured allreduce: %s", lastError().c_str());
          RANK_CHECK(ncclSend(in[r].data(), count, ncclInt32, 1 - r, comms[r], s) == ncclSuccess,
                     "captured send: %s", lastError().c_str());
          RANK_CHECK(ncclRecv(got[r].data(), count, ncclInt32, 1 - r, comms[r], s) == ncclSuccess,
                     "captured recv: %s", lastError().c_str());
        }
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        for (int r = 0; r < n; ++r)
          RANK_CHECK(gyre::fakeEndCapture(fakeStream(750 + r)) == 0, "end capture: %s", lastError().c_str());
        for (int launch = 0; launch < 2; ++launch) {
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) in[r][i] = sent(r, 0, launch, i);
          for (int r = 0; r < n; ++r) gyre::fakeLaunchGraph(graphs[r], fakeStream(750 + r));
          for (int r = 0; r < n; ++r) sync(fakeStream(750 + r));
          for (int r = 0; r < n; ++r)
            for (size_t i = 0; i < count; ++i) {
              RANK_CHECK(sum[r][i] == sent(0, 0, launch, i) + sent(1, 0, launch, i),
                         "launch %d: rank %d's sum at %zu is %d", launch, r, i, sum[r][i]);
              RANK_CHECK(got[r][i] == sent(1 - r, 0, launch, i), "launch %d: rank %d received %d at %zu", launch, r,
                         got[r][i], i);
            }
        }
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      graphOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a send captured into a graph whose receive on a rank of the same process is not fails on both ranks",
          "[device][graph][p2p][faults]") {
  RankOptions o = graphOptions();
  o.env.push_back({"GYRE_TIMEOUT", "3"});
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        const int n = 2;
        std::vector<ncclComm_t> comms;
        RANK_CHECK(ranksOfOneGpu(n, &comms), "init: %s", lastError().c_str());
        std::vector<float> a(256, 1), b(256, 0);
        gyre::FakeGraph graph;
        gyre::fakeBeginCapture(fakeStream(761), &graph);
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        RANK_CHECK(ncclRecv(b.data(), b.size(), ncclFloat32, 1, comms[0], fakeStream(760)) == ncclSuccess,
                   "eager recv: %s", lastError().c_str());
        RANK_CHECK(ncclSend(a.data(), a.size(), ncclFloat32, 0, comms[1], fakeStream(761)) == ncclSuccess,
                   "captured send: %s", lastError().c_str());
        ncclResult_t r = ncclGroupEnd();
        gyre::fakeEndCapture(fakeStream(761));
        std::string text = lastError();
        RANK_CHECK(r != ncclSuccess, "a captured send matched an uncaptured receive");
        RANK_CHECK(text.find("capture alike") != std::string::npos, "unclear error: %s", text.c_str());
        for (int k = 0; k < n; ++k) {
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(comms[k], &async);
          RANK_CHECK(async != ncclSuccess, "rank %d was not failed", k);
          ncclCommAbort(comms[k]);
        }
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}
