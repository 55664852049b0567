// The direct executor for ranks of one process sharing one GPU
// (src/device/direct/direct_calls.h, direct_clique.h) on the fake CUDA runtime:
// ncclCommInitAll with a repeated device, calls of GYRE_DIRECT_MIN_BYTES and
// more run as one pass over each other's buffers, smaller ones as kernels.
// What runs here is the clique's exchange (one thread driving every rank in a
// group, or a thread per rank), routing by size, the stream signals, the
// share split and the failures; the CUDA kernel and the driver's stream
// memory operations are verified only on a GPU (initall_check there).
#include <cstring>
#include <thread>

#include "coll_common.h"
#include "src/comm/comm.h"
#include "src/device/device_comm.h"
#include "src/device/direct/direct_calls.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "src/device/runtime/runtime.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

cudaStream_t fakeStream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

RankOptions inProcessOptions(const char* path, double timeout = 60) {
  RankOptions o;
  o.timeout_s = timeout;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_DEVICE_PATH", path}, {"GYRE_TIMEOUT", "10"},
           {"GYRE_INIT_TIMEOUT", "10"}, {"GYRE_DIRECT_MIN_BYTES", "64K"}};
  return o;
}

uint64_t directCalls(ncclComm_t comm) {
  return comm->device->direct ? comm->device->direct->callsRun.load() : 0;
}

constexpr int kRanks = 3;

// Every rank's input: element i of rank r is (i % 1000) + r / 4 (exact in float sums).
float inputAt(int rank, size_t i) { return float(i % 1000) + float(rank) * 0.25f; }

// Each rank's buffers for one round of the five collectives at `count`.
struct RankBuffers {
  std::vector<float> in, allreduce, gathered, scattered, bcast, reduced;
  explicit RankBuffers(int rank, size_t count)
      : in(count * kRanks), allreduce(count), gathered(count * kRanks), scattered(count), bcast(count),
        reduced(count) {
    for (size_t i = 0; i < in.size(); ++i) in[i] = inputAt(rank, i);
  }
};

// Rank r's five calls on its stream.
bool issueFive(ncclComm_t comm, RankBuffers& b, size_t count, cudaStream_t s) {
  const int root = kRanks - 1;
  return ncclAllReduce(b.in.data(), b.allreduce.data(), count, ncclFloat32, ncclSum, comm, s) == ncclSuccess &&
         ncclAllGather(b.in.data(), b.gathered.data(), count, ncclFloat32, comm, s) == ncclSuccess &&
         ncclReduceScatter(b.in.data(), b.scattered.data(), count, ncclFloat32, ncclSum, comm, s) == ncclSuccess &&
         ncclBroadcast(b.in.data(), b.bcast.data(), count, ncclFloat32, root, comm, s) == ncclSuccess &&
         ncclReduce(b.in.data(), b.reduced.data(), count, ncclFloat32, ncclSum, root, comm, s) == ncclSuccess;
}

// "" when rank `rank`'s outputs are right, else the first wrong element.
std::string wrongOutput(int rank, const RankBuffers& b, size_t count) {
  auto sumAt = [](size_t i) {
    float s = 0;
    for (int r = 0; r < kRanks; ++r) s += inputAt(r, i);
    return s;
  };
  char text[160];
  for (size_t i = 0; i < count; ++i) {
    float want[] = {sumAt(i), sumAt(rank * count + i), inputAt(kRanks - 1, i)};
    float got[] = {b.allreduce[i], b.scattered[i], b.bcast[i]};
    const char* what[] = {"allreduce", "reducescatter", "broadcast"};
    for (int k = 0; k < 3; ++k)
      if (got[k] != want[k]) {
        snprintf(text, sizeof(text), "%s element %zu: %g, expected %g", what[k], i, got[k], want[k]);
        return text;
      }
    if (rank == kRanks - 1 && b.reduced[i] != sumAt(i)) {
      snprintf(text, sizeof(text), "reduce element %zu: %g, expected %g", i, b.reduced[i], sumAt(i));
      return text;
    }
  }
  for (int r = 0; r < kRanks; ++r)
    for (size_t i = 0; i < count; ++i)
      if (b.gathered[r * count + i] != inputAt(r, i)) {
        snprintf(text, sizeof(text), "allgather block %d element %zu: %g", r, i, b.gathered[r * count + i]);
        return text;
      }
  return "";
}

int initAll(ncclComm_t* comms) {
  int devs[kRanks] = {};
  RANK_CHECK(ncclCommInitAll(comms, kRanks, devs) == ncclSuccess, "ncclCommInitAll: %s", lastError().c_str());
  for (int r = 0; r < kRanks; ++r)
    RANK_CHECK(comms[r]->device->direct != nullptr, "comm %d: ranks of one process on one GPU did not set up direct",
               r);
  return 0;
}

}  // namespace

TEST_CASE("ranks of one process on one GPU run calls of GYRE_DIRECT_MIN_BYTES and more directly, smaller ones as "
          "kernels; all right, in a group from one thread and from a thread each",
          "[device][inprocess]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[kRanks] = {};
        if (initAll(comms) != 0) return 1;
        // 20011 floats: 80 KB outputs (AllGather 240 KB) take the direct path
        // at 64K; 1001 floats stay below it; 1 is the smallest count.
        for (size_t count : {size_t(20011), size_t(1001), size_t(1)}) {
          const bool direct = count * sizeof(float) >= 65536;
          std::vector<RankBuffers> bufs;
          for (int r = 0; r < kRanks; ++r) bufs.emplace_back(r, count);
          uint64_t before[kRanks];
          for (int r = 0; r < kRanks; ++r) before[r] = directCalls(comms[r]);
          RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
          for (int r = 0; r < kRanks; ++r)
            RANK_CHECK(issueFive(comms[r], bufs[r], count, fakeStream(10 + r)), "count %zu rank %d: %s", count, r,
                       lastError().c_str());
          RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end (count %zu): %s", count, lastError().c_str());
          for (int r = 0; r < kRanks; ++r) {
            gyre::deviceRuntime()->streamSynchronize(fakeStream(10 + r));
            std::string wrong = wrongOutput(r, bufs[r], count);
            RANK_CHECK(wrong.empty(), "group, count %zu, rank %d: %s", count, r, wrong.c_str());
            // AllGather's output is 3x: at 1001 floats it stays below 64K too.
            RANK_CHECK(directCalls(comms[r]) - before[r] == (direct ? 5u : 0u),
                       "count %zu rank %d: %llu calls ran direct", count, r,
                       (unsigned long long)(directCalls(comms[r]) - before[r]));
          }
        }
        // A thread per rank, no group: the ranks meet in the clique.
        const size_t count = 30011;
        std::vector<RankBuffers> bufs;
        for (int r = 0; r < kRanks; ++r) bufs.emplace_back(r, count);
        bool issued[kRanks] = {};
        std::vector<std::thread> threads;
        for (int r = 0; r < kRanks; ++r)
          threads.emplace_back([&, r] { issued[r] = issueFive(comms[r], bufs[r], count, fakeStream(20 + r)); });
        for (std::thread& t : threads) t.join();
        for (int r = 0; r < kRanks; ++r) {
          RANK_CHECK(issued[r], "thread of rank %d: a call failed: %s", r, ncclGetLastError(comms[r]));
          gyre::deviceRuntime()->streamSynchronize(fakeStream(20 + r));
          std::string wrong = wrongOutput(r, bufs[r], count);
          RANK_CHECK(wrong.empty(), "threads, rank %d: %s", r, wrong.c_str());
        }
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      inProcessOptions("auto"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process, direct: counts that differ fail every rank at the call, naming the mismatch",
          "[device][inprocess][faults]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[kRanks] = {};
        if (initAll(comms) != 0) return 1;
        std::vector<float> buf(4096, 1.f);
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < kRanks; ++r)
          ncclAllReduce(buf.data(), buf.data(), r == 1 ? 1024 : 2048, ncclFloat32, ncclSum, comms[r],
                        fakeStream(30 + r));
        ncclResult_t r = ncclGroupEnd();
        std::string text = lastError();
        RANK_CHECK(r == ncclInvalidUsage && text.find("mismatched") != std::string::npos &&
                       text.find("rank 1") != std::string::npos,
                   "a mismatched group returned %d: %s", int(r), text.c_str());
        for (ncclComm_t c : comms) ncclCommAbort(c);
        return 0;
      },
      inProcessOptions("direct"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process, direct: a call no peer makes fails after GYRE_TIMEOUT naming the missing rank",
          "[device][inprocess][faults]") {
  RankOptions o = inProcessOptions("direct");
  o.env.push_back({"GYRE_TIMEOUT", "2"});
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[kRanks] = {};
        if (initAll(comms) != 0) return 1;
        std::vector<float> buf(4096, 1.f);
        double start = monotonicSeconds();
        ncclResult_t r = ncclAllReduce(buf.data(), buf.data(), 4096, ncclFloat32, ncclSum, comms[0], fakeStream(40));
        double waited = monotonicSeconds() - start;
        std::string text = ncclGetLastError(comms[0]);
        RANK_CHECK(r != ncclSuccess && text.find("GYRE_TIMEOUT") != std::string::npos &&
                       text.find("rank 1") != std::string::npos,
                   "a call no peer made returned %d: %s", int(r), text.c_str());
        RANK_CHECK(waited > 1.5 && waited < 8, "it failed after %.1f s (GYRE_TIMEOUT is 2)", waited);
        for (ncclComm_t c : comms) ncclCommAbort(c);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

// On an H100 a direct kernel reading address 0x10 left the stream saying
// "illegal memory access" while ncclCommGetAsyncError said ncclSuccess (no
// watchdog thread polls ranks of one process): gpu_bad_input's kernel_fault.
TEST_CASE("ranks of one process, direct: a sticky CUDA error after a call shows in ncclCommGetAsyncError, naming "
          "the call", "[device][inprocess][faults]") {
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[kRanks] = {};
        if (initAll(comms) != 0) return 1;
        std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(1 << 16, 1.f));
        RANK_CHECK(ncclGroupStart() == ncclSuccess, "group start");
        for (int r = 0; r < kRanks; ++r)
          ncclAllReduce(bufs[r].data(), bufs[r].data(), bufs[r].size(), ncclFloat32, ncclSum, comms[r],
                        fakeStream(50 + r));
        RANK_CHECK(ncclGroupEnd() == ncclSuccess, "group end: %s", lastError().c_str());
        for (int r = 0; r < kRanks; ++r) gyre::deviceRuntime()->streamSynchronize(fakeStream(50 + r));
        RANK_CHECK(directCalls(comms[0]) == 1, "the AllReduce did not run direct");
        ncclResult_t before = ncclInProgress;
        ncclCommGetAsyncError(comms[0], &before);
        RANK_CHECK(before == ncclSuccess, "before the fault ncclCommGetAsyncError says %d", int(before));
        gyre::fakeBreakContext("an illegal memory access was encountered (cudaErrorIllegalAddress)");
        for (int r = 0; r < kRanks; ++r) {
          ncclResult_t async = ncclSuccess;
          ncclCommGetAsyncError(comms[r], &async);
          std::string text = ncclGetLastError(comms[r]);
          RANK_CHECK(async == ncclUnhandledCudaError, "rank %d: ncclCommGetAsyncError says %d (%s)", r, int(async),
                     text.c_str());
          RANK_CHECK(text.find("AllReduce #1") != std::string::npos &&
                         text.find("illegal memory access") != std::string::npos,
                     "rank %d: the error names neither the call nor CUDA's text: %s", r, text.c_str());
        }
        for (ncclComm_t c : comms) RANK_CHECK(ncclCommAbort(c) == ncclSuccess, "abort: %s", lastError().c_str());
        return 0;
      },
      inProcessOptions("direct"));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("GYRE_DEVICE_PATH=direct for ranks of one process under CUDA_LAUNCH_BLOCKING=1 fails at init, naming it",
          "[device][inprocess][settings]") {
  RankOptions o = inProcessOptions("direct");
  o.env.push_back({"CUDA_LAUNCH_BLOCKING", "1"});
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclComm_t comms[kRanks] = {};
        int devs[kRanks] = {};
        ncclResult_t r = ncclCommInitAll(comms, kRanks, devs);
        std::string text = lastError();
        RANK_CHECK(r != ncclSuccess && text.find("CUDA_LAUNCH_BLOCKING") != std::string::npos,
                   "init returned %d: %s", int(r), text.c_str());
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks of one process, direct: PreMulSum multiplies each rank's input by that rank's own scalar, by "
          "value or in device memory", "[device][inprocess][premulsum]") {
  for (const char* leader : {"1", "0"}) {
    RankOptions options = inProcessOptions("auto");
    options.env.push_back({"GYRE_DIRECT_LEADER", leader});
    RunResult result = runRanks(
        1,
        [](int, int, const ncclUniqueId&) {
          ncclComm_t comms[kRanks] = {};
          if (initAll(comms) != 0) return 1;
          const size_t count = 20011;  // 80 KB: direct at GYRE_DIRECT_MIN_BYTES=64K
          // Products and sums of these are exact in float.
          float scalars[kRanks] = {0.5f, 1.5f, -2.0f};
          for (ncclScalarResidence_t residence : {ncclScalarHostImmediate, ncclScalarDevice}) {
            std::vector<RankBuffers> bufs;
            ncclRedOp_t ops[kRanks];
            uint64_t before[kRanks];
            for (int r = 0; r < kRanks; ++r) {
              bufs.emplace_back(r, count);
              before[r] = directCalls(comms[r]);
              RANK_CHECK(ncclRedOpCreatePreMulSum(&ops[r], &scalars[r], ncclFloat32, residence, comms[r]) ==
                             ncclSuccess,
                         "ncclRedOpCreatePreMulSum: %s", lastError().c_str());
            }
            RANK_CHECK(ncclGroupStart() == ncclSuccess, "ncclGroupStart");
            for (int r = 0; r < kRanks; ++r)
              RANK_CHECK(ncclAllReduce(bufs[r].in.data(), bufs[r].allreduce.data(), count, ncclFloat32, ops[r],
                                       comms[r], fakeStream(40 + r)) == ncclSuccess,
                         "rank %d: ncclAllReduce: %s", r, lastError().c_str());
            RANK_CHECK(ncclGroupEnd() == ncclSuccess, "ncclGroupEnd: %s", lastError().c_str());
            for (int r = 0; r < kRanks; ++r) {
              gyre::deviceRuntime()->streamSynchronize(fakeStream(40 + r));
              RANK_CHECK(directCalls(comms[r]) == before[r] + 1, "rank %d: the PreMulSum AllReduce did not run "
                         "direct", r);
              RANK_CHECK(ncclRedOpDestroy(ops[r], comms[r]) == ncclSuccess, "ncclRedOpDestroy");
            }
            for (int r = 0; r < kRanks; ++r)
              for (size_t i = 0; i < count; ++i) {
                float want = 0;
                for (int p = 0; p < kRanks; ++p) want += scalars[p] * inputAt(p, i);
                RANK_CHECK(bufs[r].allreduce[i] == want, "rank %d, %s scalars: element %zu is %g, expected %g", r,
                           residence == ncclScalarDevice ? "device" : "host", i, bufs[r].allreduce[i], want);
              }
          }
          for (ncclComm_t c : comms) RANK_CHECK(ncclCommDestroy(c) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        options);
    INFO("GYRE_DIRECT_LEADER=" << leader << ": " << result.describe());
    CHECK(result.allOk());
  }
}
