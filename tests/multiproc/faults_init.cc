// Communicator set-up under faults: a rank that never joins, ranks that join late,
// stray connections to the rendezvous port, and unique ids that are garbage. Every
// wait is bounded by a small GYRE_INIT_TIMEOUT; elapsed-time bounds are generous
// (they detect hangs, they are not performance claims).
#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "../support/reference.h"

namespace {

using namespace gyre::test;

constexpr int kInitTimeout_s = 2;

std::string hexOf(const void* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    snprintf(b, sizeof b, "%02x", static_cast<const unsigned char*>(p)[i]);
    s += b;
  }
  return s;
}

// Every rank but `missing` calls init, which must fail within a bounded time and name
// the missing rank; `missing` never calls anything.
void expectMissingRankNamed(int nranks, int missing, IdMode mode) {
  RankOptions options;
  options.idMode = mode;
  options.timeout_s = 30;
  options.env = {{"GYRE_INIT_TIMEOUT", std::to_string(kInitTimeout_s)}, {"GYRE_TIMEOUT", "5"}};
  RunResult result = runRanks(
      nranks,
      [missing](int rank, int n, const ncclUniqueId& id) {
        if (rank == missing) return 0;
        ncclComm_t comm = nullptr;
        const double t0 = monotonicSeconds();
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        const double elapsed = monotonicSeconds() - t0;
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "rank %d: init succeeded without rank %d after %.2f s", rank,
                   missing, elapsed);
        RANK_CHECK(elapsed < 15, "rank %d: init took %.2f s to fail with GYRE_INIT_TIMEOUT=%d", rank,
                   elapsed, kInitTimeout_s);
        RANK_CHECK(elapsed >= 0.5 * kInitTimeout_s,
                   "rank %d: init gave up after %.2f s, before GYRE_INIT_TIMEOUT=%d: %s", rank,
                   elapsed, kInitTimeout_s, msg.c_str());
        const std::string who = "rank " + std::to_string(missing);
        RANK_CHECK(containsWord(msg, who) && msg.find("did not join") != std::string::npos,
                   "rank %d: error %d does not say \"%s ... did not join\": \"%s\"", rank, int(r),
                   who.c_str(), msg.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  CHECK(result.elapsed_s < 20);
}

// Ranks listed in `delay_s` sleep that long before init; all must still join.
void expectLateRanksJoin(int nranks, const std::vector<double>& delay_s, IdMode mode) {
  RankOptions options;
  options.idMode = mode;
  options.timeout_s = 30;
  options.env = {{"GYRE_INIT_TIMEOUT", "10"}, {"GYRE_TIMEOUT", "10"}};
  RunResult result = runRanks(
      nranks,
      [&delay_s](int rank, int n, const ncclUniqueId& id) {
        usleep(useconds_t(delay_s[rank] * 1e6));
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        int64_t in = rank + 1, out = 0;
        r = ncclAllReduce(&in, &out, 1, ncclInt64, ncclSum, comm, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: allreduce returned %d: %s", rank, int(r),
                   lastError().c_str());
        RANK_CHECK(out == int64_t(n) * (n + 1) / 2, "rank %d: sum of 1..%d gave %lld", rank, n,
                   (long long)out);
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy failed: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

// Connects to 127.0.0.1:port, retrying until `deadline`; -1 if it never could.
int connectBy(int port, double deadline) {
  while (monotonicSeconds() < deadline) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(uint16_t(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    close(fd);
    usleep(5000);
  }
  return -1;
}

void sendAll(int fd, const std::vector<unsigned char>& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += size_t(n);
  }
}

}  // namespace

TEST_CASE("init fails on every arriving rank and names rank 2 when rank 2 of 3 never joins",
          "[faults][init]") {
  expectMissingRankNamed(3, 2, IdMode::kParent);
}

TEST_CASE("init through NCCL_COMM_ID names rank 1 when rank 1 of 3 never joins",
          "[faults][init]") {
  expectMissingRankNamed(3, 1, IdMode::kEnvCommId);
}

TEST_CASE("init through NCCL_COMM_ID names rank 0 when the rendezvous host never joins",
          "[faults][init]") {
  expectMissingRankNamed(3, 0, IdMode::kEnvCommId);
}

TEST_CASE("a failed init leaves no threads or open fds behind", "[faults][init][leaks]") {
  RankOptions options;
  options.timeout_s = 30;
  options.env = {{"GYRE_INIT_TIMEOUT", std::to_string(kInitTimeout_s)}};
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        if (rank == 1) return 0;
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r != ncclSuccess, "init succeeded without rank 1");
        const std::string left = waitForBaseline(fds, threads, fdsBefore);
        RANK_CHECK(left.empty(), "after the failed init: %s", left.c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ranks that start up to a second apart still join, in either id mode",
          "[faults][init]") {
  SECTION("parent-made id, rank 2 arrives last") {
    expectLateRanksJoin(3, {0, 0.3, 1.0}, IdMode::kParent);
  }
  SECTION("NCCL_COMM_ID, the rendezvous host rank 0 arrives last") {
    expectLateRanksJoin(3, {1.0, 0, 0.3}, IdMode::kEnvCommId);
  }
}

TEST_CASE("with NCCL_COMM_ID every process computes the same unique id", "[faults][init]") {
  RankOptions options;
  options.idMode = IdMode::kEnvCommId;
  options.timeout_s = 20;
  RunResult result = runRanks(
      3,
      [](int rank, int, const ncclUniqueId& id) {
        rankRecord("unique id", hexOf(&id, sizeof id));
        ncclUniqueId again;
        ncclResult_t r = ncclGetUniqueId(&again);
        RANK_CHECK(r == ncclSuccess, "rank %d: second ncclGetUniqueId returned %d", rank, int(r));
        RANK_CHECK(memcmp(&again, &id, sizeof id) == 0, "rank %d: a second call gave another id",
                   rank);
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  const std::string mismatches = result.recordMismatches();
  INFO(mismatches);
  CHECK(mismatches.empty());
}

TEST_CASE("two ncclGetUniqueId calls without NCCL_COMM_ID give different ids", "[faults][init]") {
  RankOptions options;
  options.idMode = IdMode::kNone;
  options.timeout_s = 20;
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclUniqueId a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        RANK_CHECK(ncclGetUniqueId(&a) == ncclSuccess, "first call: %s", lastError().c_str());
        RANK_CHECK(ncclGetUniqueId(&b) == ncclSuccess, "second call: %s", lastError().c_str());
        RANK_CHECK(memcmp(&a, &b, sizeof a) != 0, "both calls returned %s",
                   hexOf(&a, sizeof a).c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("stray connections to the rendezvous port do not break init of the real ranks",
          "[faults][init]") {
  // Rank 0 hosts the rendezvous at NCCL_COMM_ID; ranks 1 and 2 come 0.5 s later, so
  // the strays reach the listener first. One sends junk that would read as huge
  // lengths and stays open, one connects and never sends, one sends junk and closes,
  // one closes at once. The silent ones stay open until the ranks finish, so a
  // rendezvous that waits on them would run into GYRE_INIT_TIMEOUT.
  RankOptions options;
  options.idMode = IdMode::kEnvCommId;
  options.timeout_s = 30;
  options.env = {{"GYRE_INIT_TIMEOUT", "5"}, {"GYRE_TIMEOUT", "5"}};
  options.parentTask = [](const RunContext& ctx) {
    const double deadline = monotonicSeconds() + 10;
    std::vector<int> held;
    int fd = connectBy(ctx.commIdPort, deadline);
    if (fd < 0) return;
    sendAll(fd, std::vector<unsigned char>(256, 0xff));
    held.push_back(fd);
    if ((fd = connectBy(ctx.commIdPort, deadline)) >= 0) held.push_back(fd);
    if ((fd = connectBy(ctx.commIdPort, deadline)) >= 0) {
      std::vector<unsigned char> junk(24);
      uint64_t s = 99;
      for (auto& b : junk) b = (unsigned char)splitmix64(&s);
      sendAll(fd, junk);
      close(fd);
    }
    if ((fd = connectBy(ctx.commIdPort, deadline)) >= 0) close(fd);
    taskRecord("held stray connections", std::to_string(held.size()));
    while (!*ctx.finished && monotonicSeconds() < deadline + 10) usleep(10000);
    for (int h : held) close(h);
  };
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        if (rank != 0) usleep(500000);
        ncclComm_t comm = nullptr;
        const double t0 = monotonicSeconds();
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        const double elapsed = monotonicSeconds() - t0;
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d after %.2f s: %s", rank, int(r),
                   elapsed, lastError().c_str());
        RANK_CHECK(elapsed < 4, "rank %d: init took %.2f s", rank, elapsed);
        int32_t in = 1 << rank, out = 0;
        r = ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, comm, nullptr);
        RANK_CHECK(r == ncclSuccess && out == 7, "rank %d: allreduce returned %d, sum %d", rank,
                   int(r), out);
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.taskRecords["held stray connections"] == "2");
  CHECK(result.allOk());
}

TEST_CASE("init with a garbage unique id fails promptly and says the unique id is bad",
          "[faults][init]") {
  auto garbage = GENERATE(as<std::string>{}, "all zeros", "random bytes", "all 0xff");
  RankOptions options;
  options.idMode = IdMode::kNone;
  options.timeout_s = 30;
  options.env = {{"GYRE_INIT_TIMEOUT", "3"}, {"GYRE_TIMEOUT", "3"}};
  RunResult result = runRanks(
      2,
      [garbage](int rank, int n, const ncclUniqueId&) {
        ncclUniqueId id;
        memset(&id, garbage == "all 0xff" ? 0xff : 0, sizeof id);
        if (garbage == "random bytes") {
          uint64_t s = 2024;
          for (char& c : id.internal) c = char(splitmix64(&s));
        }
        ncclComm_t comm = nullptr;
        const double t0 = monotonicSeconds();
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        const double elapsed = monotonicSeconds() - t0;
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "rank %d: init with a %s id succeeded", rank, garbage.c_str());
        RANK_CHECK(elapsed < 15, "rank %d: init with a %s id took %.2f s to fail", rank,
                   garbage.c_str(), elapsed);
        RANK_CHECK(containsNoCase(msg, "unique id"),
                   "rank %d: %s id: error %d does not mention the unique id: \"%s\"", rank,
                   garbage.c_str(), int(r), msg.c_str());
        return 0;
      },
      options);
  INFO("garbage id: " << garbage);
  INFO(result.describe());
  CHECK(result.allOk());
}
