// The socket transport with several data sockets and helper threads per
// connection (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD > 1), and with the
// default 1 x 1 (one socket, every step inline), shared memory off:
// collectives whose steps are cut into pieces across the sockets must equal
// an exact integer reference, teardown must join every helper thread, ranks with different socket counts must fail init naming the variables, and
// a rank killed mid-transfer must be named by the survivors.
#include <catch2/catch.hpp>

#include <stdlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"

namespace {

using namespace gyre::test;

// Small values, so every sum is exact in int32.
int32_t inputOf(int rank, size_t i) { return int32_t((i * 2654435761u + size_t(rank) * 97) % 1000); }

std::vector<int32_t> inputFor(int rank, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = inputOf(rank, i);
  return v;
}

// Runs each collective at `count` (AllGather/ReduceScatter per rank) and checks
// every element; returns false after reporting the first difference.
bool checkCollectives(ncclComm_t comm, int rank, int n, size_t count) {
  auto report = [&](const char* coll, size_t i, int32_t got, int64_t want) {
    rankFail("rank %d: %s of %zu int32 over %d ranks: element %zu is %d, expected %lld", rank, coll, count, n, i,
             got, (long long)want);
    return false;
  };
  auto call = [&](const char* coll, ncclResult_t r) {
    if (r != ncclSuccess) rankFail("rank %d: %s of %zu int32 returned %d: %s", rank, coll, count, int(r),
                                   lastError().c_str());
    return r == ncclSuccess;
  };
  const std::vector<int32_t> mine = inputFor(rank, count);

  std::vector<int32_t> out(count, -1);
  if (!call("AllReduce", ncclAllReduce(mine.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr)))
    return false;
  for (size_t i = 0; i < count; ++i) {
    int64_t want = 0;
    for (int r = 0; r < n; ++r) want += inputOf(r, i);
    if (out[i] != want) return report("AllReduce", i, out[i], want);
  }

  std::vector<int32_t> gathered(count * size_t(n), -1);
  if (!call("AllGather", ncclAllGather(mine.data(), gathered.data(), count, ncclInt32, comm, nullptr)))
    return false;
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      if (gathered[size_t(r) * count + i] != inputOf(r, i))
        return report("AllGather", size_t(r) * count + i, gathered[size_t(r) * count + i], inputOf(r, i));

  const int root = n - 1;
  std::vector<int32_t> bcast = rank == root ? mine : std::vector<int32_t>(count, -1);
  if (!call("Broadcast", ncclBroadcast(bcast.data(), bcast.data(), count, ncclInt32, root, comm, nullptr)))
    return false;
  for (size_t i = 0; i < count; ++i)
    if (bcast[i] != inputOf(root, i)) return report("Broadcast", i, bcast[i], inputOf(root, i));

  const std::vector<int32_t> full = inputFor(rank, count * size_t(n));
  std::vector<int32_t> part(count, -1);
  if (!call("ReduceScatter",
            ncclReduceScatter(full.data(), part.data(), count, ncclInt32, ncclSum, comm, nullptr)))
    return false;
  for (size_t i = 0; i < count; ++i) {
    int64_t want = 0;
    for (int r = 0; r < n; ++r) want += inputOf(r, size_t(rank) * count + i);
    if (part[i] != want) return report("ReduceScatter", i, part[i], want);
  }
  return true;
}

// Counts below, at and far above the 64 KiB split threshold (kSplitBytes);
// 16385 int32 is one step of 65540 bytes, which 8 sockets cut into 5 full
// pieces, a short one and two empty ones. The large ones span several steps
// and wrap the FIFO.
const std::vector<size_t> kCounts = {1, 7, 16383, 16385, 70001, 300007};

void expectCorrect(int nranks, const char* nthreads, const char* nsocks) {
  RankOptions options;
  options.timeout_s = 40;
  options.env = {{"NCCL_SHM_DISABLE", "1"},     {"NCCL_SOCKET_NTHREADS", nthreads},
                 {"NCCL_NSOCKS_PERTHREAD", nsocks}, {"GYRE_TIMEOUT", "10"},
                 {"GYRE_INIT_TIMEOUT", "10"}};
  RunResult result = runRanks(
      nranks,
      [](int rank, int n, const ncclUniqueId& id) {
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        ncclComm_t comm = nullptr;
        rankProgress("init");
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        for (int round = 0; round < 2; ++round)
          for (size_t count : kCounts) {
            rankProgress("round " + std::to_string(round) + ", count " + std::to_string(count));
            if (!checkCollectives(comm, rank, n, count)) return 1;
          }
        r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "rank %d: destroy returned %d: %s", rank, int(r), lastError().c_str());
        const std::string left = waitForBaseline(fds, threads, fdsBefore);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommDestroy: %s", rank, left.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace

TEST_CASE("collectives over 3 ranks with 2 helper threads x 2 sockets equal the exact integer sums and leak no "
          "threads", "[socket]") {
  expectCorrect(3, "2", "2");
}

TEST_CASE("collectives over 2 ranks with 1 helper thread x 8 sockets, some pieces empty, equal the exact integer "
          "sums", "[socket]") {
  expectCorrect(2, "1", "8");
}

TEST_CASE("collectives over 4 ranks with 2 helper threads x 2 sockets equal the exact integer sums", "[socket]") {
  expectCorrect(4, "2", "2");
}

TEST_CASE("collectives over 2 and 4 ranks with the default 1 x 1 (one socket, no helper) equal the exact integer sums "
          "and leak no threads or descriptors", "[socket]") {
  expectCorrect(2, "1", "1");
  expectCorrect(4, "1", "1");
}

TEST_CASE("ranks with different NCCL_SOCKET_NTHREADS fail init promptly, naming the variable and both values",
          "[socket]") {
  const int port = pickFreePort();
  REQUIRE(port > 0);
  RankOptions options;
  options.idMode = IdMode::kNone;  // each rank sets its own count before gyre reads the environment
  options.timeout_s = 30;
  options.env = {{"NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port)},
                 {"NCCL_SHM_DISABLE", "1"},
                 {"NCCL_NSOCKS_PERTHREAD", "1"},
                 {"GYRE_TIMEOUT", "5"},
                 {"GYRE_INIT_TIMEOUT", "5"}};
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId&) {
        setenv("NCCL_SOCKET_NTHREADS", rank == 1 ? "2" : "1", 1);
        ncclUniqueId id;
        ncclResult_t r = ncclGetUniqueId(&id);
        RANK_CHECK(r == ncclSuccess, "rank %d: ncclGetUniqueId: %s", rank, lastError().c_str());
        ncclComm_t comm = nullptr;
        const double t0 = monotonicSeconds();
        r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        const double elapsed = monotonicSeconds() - t0;
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "rank %d: init with mismatched socket counts succeeded", rank);
        RANK_CHECK(elapsed < 4, "rank %d: init took %.2f s to fail: %s", rank, elapsed, msg.c_str());
        // Both ranks receive from the other, so each sees the mismatch itself,
        // unless the other saw it first and exited while this rank was still
        // connecting its sends: then this rank is told the peer left.
        const bool named = msg.find("NCCL_SOCKET_NTHREADS") != std::string::npos;
        const bool peerLeft = msg.find("failed or exited during init") != std::string::npos;
        RANK_CHECK(named || peerLeft, "rank %d: error neither names NCCL_SOCKET_NTHREADS nor says the peer "
                   "left: \"%s\"", rank, msg.c_str());
        if (named)
          RANK_CHECK(msg.find("2 x 1 = 2") != std::string::npos && msg.find("1 x 1 = 1") != std::string::npos,
                     "rank %d: error does not give both ranks' values: \"%s\"", rank, msg.c_str());
        rankRecord("named", named ? "1" : "0");
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  int namedBy = 0;  // the first rank to see the mismatch always names it
  for (const RankOutcome& o : result.ranks) namedBy += o.records.count("named") && o.records.at("named") == "1";
  CHECK(namedBy >= 1);
}

namespace {

void expectKilledRankNamed(const char* nthreads, const char* nsocks) {
  constexpr size_t kCount = 1 << 20;  // 4 MiB per call: long enough to be killed inside
  RankOptions options;
  options.timeout_s = 30;
  options.killRank = 1;
  options.killDelay_s = 0.2;
  options.env = {{"NCCL_SHM_DISABLE", "1"},    {"NCCL_SOCKET_NTHREADS", nthreads}, {"NCCL_NSOCKS_PERTHREAD", nsocks},
                 {"GYRE_TIMEOUT", "10"},       {"GYRE_INIT_TIMEOUT", "10"}};
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        std::vector<int32_t> buf(kCount, 1);
        r = ncclAllReduce(buf.data(), buf.data(), kCount, ncclInt32, ncclSum, comm, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: warm-up returned %d: %s", rank, int(r), lastError().c_str());
        if (rank == 1) rankMark();
        const double start = monotonicSeconds();
        double callStart = 0;
        do {
          callStart = monotonicSeconds();
          r = ncclAllReduce(buf.data(), buf.data(), kCount, ncclInt32, ncclSum, comm, nullptr);
        } while (r == ncclSuccess && monotonicSeconds() - start < 15);
        const std::string msg = lastError();
        RANK_CHECK(rank != 1, "rank 1 was to be killed but is still running");
        RANK_CHECK(r != ncclSuccess, "rank %d: allreduce kept succeeding after rank 1 died", rank);
        RANK_CHECK(monotonicSeconds() - callStart < 5, "rank %d: the failing call took %.2f s: %s", rank,
                   monotonicSeconds() - callStart, msg.c_str());
        RANK_CHECK(containsWord(msg, "rank 1"), "rank %d: error does not name rank 1: \"%s\"", rank, msg.c_str());
        r = ncclCommAbort(comm);
        RANK_CHECK(r == ncclSuccess, "rank %d: abort returned %d: %s", rank, int(r), lastError().c_str());
        const std::string left = waitForBaseline(fds, threads, fdsBefore);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommAbort: %s", rank, left.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace

TEST_CASE("a rank killed while its helpers stream large steps is named by the survivors", "[socket]") {
  expectKilledRankNamed("2", "2");
}

TEST_CASE("a rank killed mid-stream on the default single socket is named by the survivors",
          "[socket]") {
  expectKilledRankNamed("1", "1");
}
