// Point-to-point on device communicators (src/device/copy/copy_calls.h) on
// the fake CUDA runtime: a rank's send to itself is one copy on its stream;
// ranks of one process (one GPU or several with peer access) pair their
// calls in the communicator's exchange and the second side copies between
// the two streams' events; peers in other processes stage through host
// memory. Every case checks the bytes that arrive against what the peer
// sent and which path each call took. The copy engines and the driver's
// event ordering themselves are verified only on a GPU.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/device/copy/copy_calls.h"
#include "src/device/device_comm.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "src/device/runtime/runtime.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;
using gyre::P2PPath;

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }
void sync(cudaStream_t s) { gyre::deviceRuntime()->streamSynchronize(s); }

RankOptions p2pOptions(double timeout = 120) {
  RankOptions o;
  o.timeout_s = timeout;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}};
  return o;
}

uint64_t pathCount(ncclComm_t comm, P2PPath p) {
  return comm->device->copies->calls[static_cast<int>(p)].load();
}

// Rank r's bytes for peer p in one case: seeded random data of the type.
std::vector<char> payload(ncclDataType_t type, size_t count, uint64_t id, int from, int to) {
  std::vector<char> b(count * typeInfo(type).size + 1);
  fillRankInput(type, ncclSum, 1, caseId(id, {uint64_t(from), uint64_t(to)}), 0, b.data(), count);
  return b;
}

std::vector<size_t> p2pCounts() { return {0, 1, 2, 3, 7, 13, 31, 127, 1009}; }

// Every rank sends `count` elements to every rank (itself included) and
// receives from every rank, in one group from one thread; block p of rank
// r's output must be what p sent to r.
int sendRecvAllPairs(ncclComm_t* comms, int n, ncclDataType_t type, size_t count, uint64_t id) {
  const size_t bytes = count * typeInfo(type).size;
  std::vector<std::vector<char>> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      std::vector<char> b = payload(type, count, id, r, p);
      send[r].insert(send[r].end(), b.begin(), b.begin() + bytes);
    }
    recv[r].assign(bytes * n + 1, char(kUnwrittenByte));
    send[r].push_back(0);
  }
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) {
      RANK_CHECK(ncclSend(send[r].data() + p * bytes, count, type, p, comms[r], fakeStream(100 + r)) == ncclSuccess,
                 "ncclSend %d->%d: %s", r, p, lastError().c_str());
      RANK_CHECK(ncclRecv(recv[r].data() + p * bytes, count, type, p, comms[r], fakeStream(100 + r)) == ncclSuccess,
                 "ncclRecv %d<-%d: %s", r, p, lastError().c_str());
    }
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  for (int r = 0; r < n; ++r) sync(fakeStream(100 + r));
  for (int r = 0; r < n; ++r)
    for (int p = 0; p < n; ++p) {
      std::string wrong = compareExact(typeInfo(type), recv[r].data() + p * bytes, send[p].data() + r * bytes, count);
      RANK_CHECK(wrong.empty(), "%s count %zu: rank %d's block from rank %d: %s", typeInfo(type).name, count, r, p,
                 wrong.c_str());
    }
  RANK_CHECK((unsigned char)recv[0][bytes * n] == kUnwrittenByte, "a receive wrote past its buffer");
  return 0;
}

// AlltoAll (out of place and in place), Gather and Scatter over the ranks.
int p2pCollectives(ncclComm_t* comms, int n, size_t count, uint64_t id) {
  const ncclDataType_t type = ncclFloat32;
  const size_t bytes = count * sizeof(float);
  std::vector<std::vector<char>> in(n), out(n), inPlace(n), gathered(n), scattered(n);
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      std::vector<char> b = payload(type, count, id, r, p);
      in[r].insert(in[r].end(), b.begin(), b.begin() + bytes);
    }
    out[r].assign(bytes * n, char(kUnwrittenByte));
    inPlace[r] = in[r];
    gathered[r].assign(bytes * n, char(kUnwrittenByte));
    scattered[r].assign(bytes, char(kUnwrittenByte));
  }
  const int root = n - 1;
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r) {
    cudaStream_t s = fakeStream(200 + r);
    RANK_CHECK(ncclAlltoAll(in[r].data(), out[r].data(), count, type, comms[r], s) == ncclSuccess, "alltoall: %s",
               lastError().c_str());
    RANK_CHECK(ncclGather(in[r].data() + root * bytes, gathered[r].data(), count, type, root, comms[r], s) ==
                   ncclSuccess, "gather: %s", lastError().c_str());
    RANK_CHECK(ncclScatter(in[r].data(), scattered[r].data(), count, type, 0, comms[r], s) == ncclSuccess,
               "scatter: %s", lastError().c_str());
  }
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  // In place in a group of its own: every block is sent and overwritten.
  RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
  for (int r = 0; r < n; ++r)
    RANK_CHECK(ncclAlltoAll(inPlace[r].data(), inPlace[r].data(), count, type, comms[r], fakeStream(200 + r)) ==
                   ncclSuccess, "in-place alltoall: %s", lastError().c_str());
  RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
  for (int r = 0; r < n; ++r) sync(fakeStream(200 + r));
  const TypeInfo& t = typeInfo(type);
  for (int r = 0; r < n; ++r) {
    for (int p = 0; p < n; ++p) {
      const char* sent = in[p].data() + r * bytes;
      std::string a = compareExact(t, out[r].data() + p * bytes, sent, count);
      RANK_CHECK(a.empty(), "alltoall count %zu: rank %d block %d: %s", count, r, p, a.c_str());
      std::string b = compareExact(t, inPlace[r].data() + p * bytes, sent, count);
      RANK_CHECK(b.empty(), "in-place alltoall count %zu: rank %d block %d: %s", count, r, p, b.c_str());
      if (r == root) {
        std::string g = compareExact(t, gathered[r].data() + p * bytes, in[p].data() + root * bytes, count);
        RANK_CHECK(g.empty(), "gather count %zu: block %d: %s", count, p, g.c_str());
      }
    }
    std::string s = compareExact(t, scattered[r].data(), in[0].data() + r * bytes, count);
    RANK_CHECK(s.empty(), "scatter count %zu: rank %d: %s", count, r, s.c_str());
  }
  return 0;
}

// ncclCommInitAll over `devs`; every pair and every p2p collective, then
// the path counts: nothing staged.
int allPairsOn(const std::vector<int>& devs) {
  const int n = static_cast<int>(devs.size());
  std::vector<ncclComm_t> comms(n);
  RANK_CHECK(ncclCommInitAll(comms.data(), n, devs.data()) == ncclSuccess, "ncclCommInitAll: %s",
             lastError().c_str());
  // Each rank's streams on its own device, as CUDA requires of a rank's
  // stream (the fake makes a stream on the device current at its first use).
  for (int r = 0; r < n; ++r) {
    gyre::deviceRuntime()->setDevice(devs[r]);
    for (uintptr_t s : {100 + r, 200 + r}) sync(fakeStream(s));
  }
  gyre::deviceRuntime()->setDevice(0);
  uint64_t id = 1;
  for (ncclDataType_t type : allTypes())
    for (size_t count : p2pCounts())
      if (sendRecvAllPairs(comms.data(), n, type, count, id++) != 0) return 1;
  for (size_t count : {size_t(0), size_t(1), size_t(13), size_t(4099)})
    if (p2pCollectives(comms.data(), n, count, id++) != 0) return 1;
  for (int r = 0; r < n; ++r) {
    RANK_CHECK(pathCount(comms[r], P2PPath::Staged) == 0, "rank %d staged %llu calls", r,
               (unsigned long long)pathCount(comms[r], P2PPath::Staged));
    RANK_CHECK(pathCount(comms[r], P2PPath::SelfCopy) > 0 && pathCount(comms[r], P2PPath::ProcessCopy) > 0,
               "rank %d: %llu self copies, %llu process copies", r,
               (unsigned long long)pathCount(comms[r], P2PPath::SelfCopy),
               (unsigned long long)pathCount(comms[r], P2PPath::ProcessCopy));
  }
  for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

}  // namespace

TEST_CASE("ranks of one process on one GPU exchange every type and count by copies, AlltoAll, Gather and Scatter "
          "included, and stage nothing",
          "[device][p2p]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return allPairsOn({0, 0, 0}); }, p2pOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process on several GPUs with peer access exchange by copies too", "[device][p2p]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) { return allPairsOn({0, 1, 2, 3}); },
                              p2pOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("GYRE_DEVICE_PATH=staged stages sends between ranks of one process, with the same results",
          "[device][p2p]") {
  RankOptions o = p2pOptions();
  o.env.push_back({"GYRE_DEVICE_PATH", "staged"});
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[2] = {};
        int devs[2] = {0, 0};
        RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
        if (sendRecvAllPairs(comms, 2, ncclFloat64, 1009, 77) != 0) return 1;
        for (int r = 0; r < 2; ++r)
          RANK_CHECK(pathCount(comms[r], P2PPath::Staged) == 2 && pathCount(comms[r], P2PPath::ProcessCopy) == 0 &&
                         pathCount(comms[r], P2PPath::SelfCopy) == 2,
                     "rank %d: %llu staged, %llu process copies, %llu self copies", r,
                     (unsigned long long)pathCount(comms[r], P2PPath::Staged),
                     (unsigned long long)pathCount(comms[r], P2PPath::ProcessCopy),
                     (unsigned long long)pathCount(comms[r], P2PPath::SelfCopy));
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process each driven by its own thread, without a group, exchange in both directions",
          "[device][p2p]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[2] = {};
        int devs[2] = {0, 0};
        RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
        const size_t count = 100003;
        std::vector<int32_t> send[2], recv[2];
        for (int r = 0; r < 2; ++r) {
          send[r].resize(count);
          for (size_t i = 0; i < count; ++i) send[r][i] = int32_t(i * 7 + r * 1000003);
          recv[r].assign(count, -1);
        }
        ncclResult_t results[2][2] = {};
        std::thread threads[2];
        for (int r = 0; r < 2; ++r)
          threads[r] = std::thread([&, r] {
            // Rank 0 sends first, rank 1 receives first: each first call
            // waits on the host for the other thread's matching one.
            cudaStream_t s = fakeStream(300 + r);
            for (int k = 0; k < 2; ++k)
              results[r][k] = (k == r) ? ncclSend(send[r].data(), count, ncclInt32, 1 - r, comms[r], s)
                                       : ncclRecv(recv[r].data(), count, ncclInt32, 1 - r, comms[r], s);
          });
        for (std::thread& t : threads) t.join();
        for (int r = 0; r < 2; ++r) {
          RANK_CHECK(results[r][0] == ncclSuccess && results[r][1] == ncclSuccess, "rank %d: %d %d: %s", r,
                     int(results[r][0]), int(results[r][1]), lastError().c_str());
          sync(fakeStream(300 + r));
          RANK_CHECK(recv[r] == send[1 - r], "rank %d received wrong data (first element %d)", r, recv[r][0]);
          RANK_CHECK(pathCount(comms[r], P2PPath::ProcessCopy) == 2, "rank %d: %llu process copies", r,
                     (unsigned long long)pathCount(comms[r], P2PPath::ProcessCopy));
        }
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      p2pOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a group that mixes collectives with sends and receives on ranks of one process is right",
          "[device][p2p]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        const int n = 3;
        ncclComm_t comms[n] = {};
        int devs[n] = {0, 0, 0};
        RANK_CHECK(ncclCommInitAll(comms, n, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
        const size_t count = 4099;
        std::vector<float> in[n], sum[n], fromPrev[n];
        for (int r = 0; r < n; ++r) {
          in[r].resize(count);
          for (size_t i = 0; i < count; ++i) in[r][i] = float(i % 97) + r;
          sum[r].assign(count, -1.f);
          fromPrev[r].assign(count, -1.f);
        }
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < n; ++r) {
          cudaStream_t s = fakeStream(400 + r);
          RANK_CHECK(ncclAllReduce(in[r].data(), sum[r].data(), count, ncclFloat32, ncclSum, comms[r], s) ==
                         ncclSuccess, "allreduce: %s", lastError().c_str());
          RANK_CHECK(ncclSend(in[r].data(), count, ncclFloat32, (r + 1) % n, comms[r], s) == ncclSuccess, "send: %s",
                     lastError().c_str());
          RANK_CHECK(ncclRecv(fromPrev[r].data(), count, ncclFloat32, (r + n - 1) % n, comms[r], s) == ncclSuccess,
                     "recv: %s", lastError().c_str());
        }
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        for (int r = 0; r < n; ++r) {
          sync(fakeStream(400 + r));
          for (size_t i = 0; i < count; ++i) {
            RANK_CHECK(sum[r][i] == 3.f * float(i % 97) + 3.f, "rank %d allreduce[%zu] = %g", r, i, sum[r][i]);
            RANK_CHECK(fromPrev[r][i] == in[(r + n - 1) % n][i], "rank %d recv[%zu] = %g", r, i, fromPrev[r][i]);
          }
        }
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      p2pOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("sends and receives of one rank on different streams complete in each stream's order",
          "[device][p2p]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[2] = {};
        int devs[2] = {0, 0};
        RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
        const size_t count = 30011;
        // Rank r sends on stream 900+2r and receives on 901+2r, to the peer and to itself.
        std::vector<uint16_t> send[2], fromPeer[2], fromSelf[2];
        for (int r = 0; r < 2; ++r) {
          send[r].resize(count);
          for (size_t i = 0; i < count; ++i) send[r][i] = uint16_t(i * 3 + r * 101);
          fromPeer[r].assign(count, 0xFFFF);
          fromSelf[r].assign(count, 0xFFFF);
        }
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < 2; ++r) {
          cudaStream_t sendStream = fakeStream(900 + 2 * r), recvStream = fakeStream(901 + 2 * r);
          RANK_CHECK(ncclSend(send[r].data(), count, ncclFloat16, 1 - r, comms[r], sendStream) == ncclSuccess,
                     "send: %s", lastError().c_str());
          RANK_CHECK(ncclSend(send[r].data(), count, ncclFloat16, r, comms[r], sendStream) == ncclSuccess,
                     "send to self: %s", lastError().c_str());
          RANK_CHECK(ncclRecv(fromPeer[r].data(), count, ncclFloat16, 1 - r, comms[r], recvStream) == ncclSuccess,
                     "recv: %s", lastError().c_str());
          RANK_CHECK(ncclRecv(fromSelf[r].data(), count, ncclFloat16, r, comms[r], recvStream) == ncclSuccess,
                     "recv from self: %s", lastError().c_str());
        }
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        // Each stream alone is enough: the send streams wait for the copies
        // that read their buffers, the receive streams for those that fill theirs.
        for (int r = 0; r < 2; ++r) sync(fakeStream(901 + 2 * r));
        for (int r = 0; r < 2; ++r) {
          RANK_CHECK(fromPeer[r] == send[1 - r], "rank %d: wrong data from its peer", r);
          RANK_CHECK(fromSelf[r] == send[r], "rank %d: wrong data from itself", r);
        }
        for (int r = 0; r < 2; ++r) sync(fakeStream(900 + 2 * r));
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      p2pOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a rank's send to itself is a copy on its stream, captured into a graph too", "[device][p2p]") {
  RunResult result = runRanks(
      1,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
        uint64_t caseNo = 1;
        for (ncclDataType_t type : allTypes())
          for (size_t count : p2pCounts())
            if (sendRecvAllPairs(&comm, 1, type, count, caseNo++) != 0) return 1;
        // Captured: nothing moves until the graph is launched, then every launch copies.
        std::vector<int64_t> src(513), dst(513, -1);
        for (size_t i = 0; i < src.size(); ++i) src[i] = int64_t(i) * 31 - 7;
        cudaStream_t s = fakeStream(500);
        gyre::FakeGraph graph;
        gyre::fakeBeginCapture(s, &graph);
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        RANK_CHECK(ncclSend(src.data(), src.size(), ncclInt64, 0, comm, s) == ncclSuccess, "captured send: %s",
                   lastError().c_str());
        RANK_CHECK(ncclRecv(dst.data(), dst.size(), ncclInt64, 0, comm, s) == ncclSuccess, "captured recv: %s",
                   lastError().c_str());
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        RANK_CHECK(gyre::fakeEndCapture(s) == 0, "end capture: %s", lastError().c_str());
        sync(s);
        RANK_CHECK(dst[0] == -1, "the captured copy ran before the graph was launched");
        for (int launch = 0; launch < 2; ++launch) {
          src[0] = launch;
          gyre::fakeLaunchGraph(graph, s);
          sync(s);
          RANK_CHECK(dst == src, "graph launch %d: wrong copy (first element %lld)", launch, (long long)dst[0]);
        }
        RANK_CHECK(pathCount(comm, P2PPath::Staged) == 0, "a send to self staged");
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      p2pOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

namespace {

// Buffers of the fake device (CUDA IPC can share only these), or ordinary
// memory, which the fake takes for device memory but cannot share.
struct Buffer {
  explicit Buffer(size_t bytes, bool device) : bytes_(bytes) {
    if (device) gyre::deviceRuntime()->deviceAlloc(bytes ? bytes : 1, &p_);
    else p_ = malloc(bytes ? bytes : 1);
    device_ = device;
  }
  ~Buffer() {
    if (device_) gyre::deviceRuntime()->deviceFree(p_);
    else free(p_);
  }
  char* data() { return static_cast<char*>(p_); }
  void* p_ = nullptr;
  size_t bytes_;
  bool device_;
};

// Every pair over processes (one rank each), then AlltoAll in and out of
// place, Gather and Scatter; the path each call took is `want`.
int acrossProcesses(int rank, int n, const ncclUniqueId& id, bool deviceBuffers, P2PPath want) {
  ncclComm_t comm = nullptr;
  RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
  cudaStream_t s = fakeStream(600);
  uint64_t caseNo = 1;
  for (ncclDataType_t type : {ncclInt8, ncclFloat16, ncclFloat32, ncclFloat64, ncclFloat8e5m2})
    for (size_t count : p2pCounts()) {
      const size_t bytes = count * typeInfo(type).size;
      Buffer send(bytes * n, deviceBuffers), recv(bytes * n + 1, deviceBuffers);
      for (int p = 0; p < n; ++p) {
        std::vector<char> b = payload(type, count, caseNo, rank, p);
        memcpy(send.data() + p * bytes, b.data(), bytes);
      }
      memset(recv.data(), kUnwrittenByte, bytes * n + 1);
      RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
      for (int p = 0; p < n; ++p) {
        RANK_CHECK(ncclSend(send.data() + p * bytes, count, type, p, comm, s) == ncclSuccess, "send: %s",
                   lastError().c_str());
        RANK_CHECK(ncclRecv(recv.data() + p * bytes, count, type, p, comm, s) == ncclSuccess, "recv: %s",
                   lastError().c_str());
      }
      RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
      sync(s);
      for (int p = 0; p < n; ++p) {
        std::vector<char> b = payload(type, count, caseNo, p, rank);
        std::string wrong = compareExact(typeInfo(type), recv.data() + p * bytes, b.data(), count);
        RANK_CHECK(wrong.empty(), "rank %d %s count %zu from rank %d: %s", rank, typeInfo(type).name, count, p,
                   wrong.c_str());
      }
      RANK_CHECK((unsigned char)recv.data()[bytes * n] == kUnwrittenByte, "a receive wrote past its buffer");
      ++caseNo;
    }
  for (size_t count : {size_t(1), size_t(13), size_t(4099)}) {
    const size_t bytes = count * sizeof(float);
    Buffer in(bytes * n, deviceBuffers), out(bytes * n, deviceBuffers), inPlace(bytes * n, deviceBuffers),
        gathered(bytes * n, deviceBuffers), scattered(bytes, deviceBuffers);
    for (int p = 0; p < n; ++p) {
      std::vector<char> b = payload(ncclFloat32, count, caseNo, rank, p);
      memcpy(in.data() + p * bytes, b.data(), bytes);
    }
    memcpy(inPlace.data(), in.data(), bytes * n);
    const int root = n - 1;
    RANK_CHECK(ncclAlltoAll(in.data(), out.data(), count, ncclFloat32, comm, s) == ncclSuccess, "alltoall: %s",
               lastError().c_str());
    RANK_CHECK(ncclAlltoAll(inPlace.data(), inPlace.data(), count, ncclFloat32, comm, s) == ncclSuccess,
               "in-place alltoall: %s", lastError().c_str());
    RANK_CHECK(ncclGather(in.data() + root * bytes, gathered.data(), count, ncclFloat32, root, comm, s) ==
                   ncclSuccess, "gather: %s", lastError().c_str());
    RANK_CHECK(ncclScatter(in.data(), scattered.data(), count, ncclFloat32, 0, comm, s) == ncclSuccess,
               "scatter: %s", lastError().c_str());
    sync(s);
    const TypeInfo& t = typeInfo(ncclFloat32);
    for (int p = 0; p < n; ++p) {
      std::vector<char> sent = payload(ncclFloat32, count, caseNo, p, rank);
      std::string a = compareExact(t, out.data() + p * bytes, sent.data(), count);
      std::string b = compareExact(t, inPlace.data() + p * bytes, sent.data(), count);
      RANK_CHECK(a.empty() && b.empty(), "alltoall count %zu rank %d block %d: %s%s", count, rank, p, a.c_str(),
                 b.c_str());
      if (rank == root) {
        std::vector<char> g = payload(ncclFloat32, count, caseNo, p, root);
        std::string w = compareExact(t, gathered.data() + p * bytes, g.data(), count);
        RANK_CHECK(w.empty(), "gather count %zu block %d: %s", count, p, w.c_str());
      }
    }
    std::vector<char> sc = payload(ncclFloat32, count, caseNo, 0, rank);
    std::string w = compareExact(t, scattered.data(), sc.data(), count);
    RANK_CHECK(w.empty(), "scatter count %zu rank %d: %s", count, rank, w.c_str());
    ++caseNo;
  }
  // Heap buffers cannot be shared, but the in-place AlltoAll's sends go
  // from a device scratch copy, which can: one send and one receive per
  // peer and size by IPC.
  const uint64_t scratchCopies = 3 * 2 * uint64_t(n - 1);
  if (!deviceBuffers && want == P2PPath::Staged)
    RANK_CHECK(pathCount(comm, P2PPath::IpcCopy) == scratchCopies, "rank %d: %llu IPC copies, expected %llu", rank,
               (unsigned long long)pathCount(comm, P2PPath::IpcCopy), (unsigned long long)scratchCopies);
  for (P2PPath p : {P2PPath::ProcessCopy, P2PPath::IpcCopy, P2PPath::Staged})
    if (p != want && !(p == P2PPath::IpcCopy && !deviceBuffers))
      RANK_CHECK(pathCount(comm, p) == 0, "rank %d: %llu calls took %s", rank,
                 (unsigned long long)pathCount(comm, p), gyre::p2pPathName(p));
  RANK_CHECK(pathCount(comm, want) > 0, "rank %d: no call took %s", rank, gyre::p2pPathName(want));
  RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
  return 0;
}

}  // namespace

TEST_CASE("ranks of other processes on one GPU exchange device buffers by CUDA IPC copies, every pair and the "
          "p2p collectives",
          "[device][p2p][ipc]") {
  RunResult result = runRanks(
      3, [](int rank, int n, const ncclUniqueId& id) { return acrossProcesses(rank, n, id, true, P2PPath::IpcCopy); },
      p2pOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("buffers CUDA IPC cannot share, and GYRE_DEVICE_PATH=staged, stage between processes with the same "
          "results",
          "[device][p2p][ipc]") {
  RunResult heap = runRanks(
      2, [](int rank, int n, const ncclUniqueId& id) { return acrossProcesses(rank, n, id, false, P2PPath::Staged); },
      p2pOptions());
  INFO("heap buffers: " << heap.describe());
  CHECK(heap.allOk());
  RankOptions o = p2pOptions();
  o.env.push_back({"GYRE_DEVICE_PATH", "staged"});
  RunResult forced = runRanks(
      2, [](int rank, int n, const ncclUniqueId& id) { return acrossProcesses(rank, n, id, true, P2PPath::Staged); },
      o);
  INFO("GYRE_DEVICE_PATH=staged: " << forced.describe());
  CHECK(forced.allOk());
}

TEST_CASE("a receive from a process that never sends, or that dies, fails within the timeout naming it",
          "[device][p2p][ipc][faults]") {
  RankOptions o = p2pOptions();
  o.env.push_back({"GYRE_TIMEOUT", "2"});
  o.killRank = 1;
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        RANK_CHECK(ncclCommInitRank(&comm, n, id, rank) == ncclSuccess, "init: %s", lastError().c_str());
        Buffer b(4096, true);
        if (rank == 1) {
          rankMark();  // killed from here on, without sending
          for (;;) pause();
        }
        auto start = std::chrono::steady_clock::now();
        ncclResult_t r = ncclRecv(b.data(), 1024, ncclFloat32, 1, comm, fakeStream(800));
        double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::string text = lastError();
        RANK_CHECK(r != ncclSuccess, "a receive from a dead rank succeeded");
        RANK_CHECK(waited < 8, "the receive waited %.1f s with GYRE_TIMEOUT=2", waited);
        RANK_CHECK(text.find("rank 1") != std::string::npos && text.find("ncclRecv") != std::string::npos &&
                       (text.find("died") != std::string::npos || text.find("GYRE_TIMEOUT") != std::string::npos),
                   "unclear error: %s", text.c_str());
        ncclCommAbort(comm);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("mismatched sizes and a receive with no send fail within the timeout, naming both ranks",
          "[device][p2p][faults]") {
  RankOptions o = p2pOptions();
  o.env.push_back({"GYRE_TIMEOUT", "2"});
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[2] = {};
        int devs[2] = {0, 0};
        RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
        std::vector<float> a(64, 1.f), b(64, 0.f);
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        ncclSend(a.data(), 64, ncclFloat32, 1, comms[0], fakeStream(700));
        ncclRecv(b.data(), 32, ncclFloat32, 0, comms[1], fakeStream(701));
        ncclResult_t r = ncclGroupEnd();
        std::string text = lastError();
        RANK_CHECK(r != ncclSuccess, "a send of 256 bytes met a receive of 128 bytes and the group succeeded");
        RANK_CHECK(text.find("256") != std::string::npos && text.find("128") != std::string::npos &&
                       text.find("rank 0") != std::string::npos && text.find("rank 1") != std::string::npos,
                   "unclear error: %s", text.c_str());
        for (int k = 0; k < 2; ++k) {
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(comms[k], &async);
          RANK_CHECK(async != ncclSuccess, "comm %d did not fail", k);
        }
        for (ncclComm_t c : comms) ncclCommAbort(c);

        // A fresh pair: rank 1 receives, rank 0 never sends.
        RANK_CHECK(ncclCommInitAll(comms, 2, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
        auto start = std::chrono::steady_clock::now();
        r = ncclRecv(b.data(), 64, ncclFloat32, 0, comms[1], fakeStream(702));
        double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        text = lastError();
        RANK_CHECK(r != ncclSuccess, "a receive with no send succeeded");
        RANK_CHECK(waited < 8, "the receive waited %.1f s with GYRE_TIMEOUT=2", waited);
        RANK_CHECK(text.find("ncclRecv") != std::string::npos && text.find("rank 0") != std::string::npos &&
                       text.find("rank 1") != std::string::npos && text.find("GYRE_TIMEOUT") != std::string::npos,
                   "unclear error: %s", text.c_str());
        for (ncclComm_t c : comms) ncclCommAbort(c);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}
