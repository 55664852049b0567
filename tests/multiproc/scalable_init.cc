// Several-root rendezvous (gyreCommInitRankScalableHost, the host form of
// ncclCommInitRankScalable): with nId ids each id's root gathers one block of
// ranks and root 0 assembles the table. The communicators it builds must be
// complete (an AllReduce over them sums every rank), the ids may come from
// different ranks, and a missing root or rank is named on every rank within
// a short GYRE_INIT_TIMEOUT.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"

namespace {

using namespace gyre::test;

constexpr int kInitTimeout_s = 2;

// Ids made after the fork travel through files in a directory every rank
// knows (write, then rename, so a reader never sees half an id).
void publishId(const std::string& dir, int index, const ncclUniqueId& id) {
  const std::string path = dir + "/id" + std::to_string(index);
  FILE* f = fopen((path + ".tmp").c_str(), "wb");
  if (!f) return;
  fwrite(&id, sizeof(id), 1, f);
  fclose(f);
  rename((path + ".tmp").c_str(), path.c_str());
}

bool awaitId(const std::string& dir, int index, ncclUniqueId* id) {
  const std::string path = dir + "/id" + std::to_string(index);
  const double until = monotonicSeconds() + 10;
  while (monotonicSeconds() < until) {
    if (FILE* f = fopen(path.c_str(), "rb")) {
      size_t got = fread(id, sizeof(*id), 1, f);
      fclose(f);
      if (got == 1) return true;
    }
    usleep(10000);
  }
  return false;
}

std::string makeTempDir() {
  char tmpl[] = "/tmp/gyre_scalable_XXXXXX";
  return mkdtemp(tmpl) ? tmpl : "";
}

// Every rank contributes rank + 1 at each of 33 ints; the sum is n(n+1)/2.
int checkAllReduce(ncclComm_t comm, int rank, int n) {
  int count = 0, me = -1;
  RANK_CHECK(ncclCommCount(comm, &count) == ncclSuccess && count == n, "rank %d: ncclCommCount %d", rank, count);
  RANK_CHECK(ncclCommUserRank(comm, &me) == ncclSuccess && me == rank, "rank %d: ncclCommUserRank %d", rank, me);
  std::vector<int32_t> buf(33, rank + 1);
  RANK_CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclInt32, ncclSum, comm, nullptr) == ncclSuccess,
             "rank %d: allreduce: %s", rank, lastError().c_str());
  for (int32_t v : buf) RANK_CHECK(v == n * (n + 1) / 2, "rank %d: sum %d, expected %d", rank, v, n * (n + 1) / 2);
  return 0;
}

RankOptions options(int idCount, IdMode mode = IdMode::kParent) {
  RankOptions o;
  o.idMode = mode;
  o.idCount = idCount;
  o.timeout_s = 40;
  o.env = {{"GYRE_INIT_TIMEOUT", std::to_string(kInitTimeout_s)}, {"GYRE_TIMEOUT", "10"}};
  return o;
}

}  // namespace

TEST_CASE("4 ranks with nId = 1, 2 and 4 roots build one communicator whose AllReduce sums every rank",
          "[multiproc][init][scalable]") {
  for (int nId : {1, 2, 4}) {
    RunResult result = runRanks(
        4,
        [nId](int rank, int n, const ncclUniqueId&) {
          std::vector<ncclUniqueId> ids = rankIds();
          RANK_CHECK(static_cast<int>(ids.size()) == nId, "launcher made %zu ids", ids.size());
          ncclComm_t comm = nullptr;
          RANK_CHECK(gyreCommInitRankScalableHost(&comm, n, rank, nId, ids.data(), nullptr) == ncclSuccess,
                     "rank %d, nId %d: init: %s", rank, nId, lastError().c_str());
          if (checkAllReduce(comm, rank, n) != 0) return 1;
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        options(nId));
    INFO("nId=" << nId << ": " << result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("3 ranks join through 2 roots whose ids were made by ranks 0 and 2 after the fork",
          "[multiproc][init][scalable]") {
  const std::string dir = makeTempDir();
  REQUIRE(!dir.empty());
  // Root 0 serves rank 0 (block 0..0), root 1 ranks 1 and 2; rank 2 made id 1.
  RunResult result = runRanks(
      3,
      [&dir](int rank, int n, const ncclUniqueId&) {
        std::vector<ncclUniqueId> ids(2);
        if (rank == 0 || rank == 2) {
          RANK_CHECK(ncclGetUniqueId(&ids[rank / 2]) == ncclSuccess, "ncclGetUniqueId: %s", lastError().c_str());
          publishId(dir, rank / 2, ids[rank / 2]);
        }
        RANK_CHECK(awaitId(dir, 0, &ids[0]) && awaitId(dir, 1, &ids[1]), "rank %d: ids never appeared", rank);
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankScalableHost(&comm, n, rank, 2, ids.data(), nullptr) == ncclSuccess,
                   "rank %d: init: %s", rank, lastError().c_str());
        if (checkAllReduce(comm, rank, n) != 0) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options(1, IdMode::kNone));
  INFO(result.describe());
  CHECK(result.allOk());
  system(("rm -rf " + dir).c_str());
}

TEST_CASE("when the process that made commIds[1] is gone, every rank's init fails naming root 1",
          "[multiproc][init][scalable][faults]") {
  const std::string dir = makeTempDir();
  REQUIRE(!dir.empty());
  RunResult result = runRanks(
      4,
      [&dir](int rank, int n, const ncclUniqueId&) {
        std::vector<ncclUniqueId> ids(2);
        if (rank == 0) {
          // A short-lived process makes id 1 and exits, taking its root with it.
          pid_t pid = fork();
          if (pid == 0) {
            ncclUniqueId id;
            if (ncclGetUniqueId(&id) == ncclSuccess) publishId(dir, 1, id);
            _exit(0);
          }
          int status = 0;
          RANK_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/wait of the id maker failed");
          RANK_CHECK(ncclGetUniqueId(&ids[0]) == ncclSuccess, "ncclGetUniqueId: %s", lastError().c_str());
          publishId(dir, 0, ids[0]);
        }
        RANK_CHECK(awaitId(dir, 0, &ids[0]) && awaitId(dir, 1, &ids[1]), "rank %d: ids never appeared", rank);
        ncclComm_t comm = nullptr;
        const double t0 = monotonicSeconds();
        ncclResult_t r = gyreCommInitRankScalableHost(&comm, n, rank, 2, ids.data(), nullptr);
        const double elapsed = monotonicSeconds() - t0;
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "rank %d: init succeeded without root 1", rank);
        RANK_CHECK(elapsed < 3 * kInitTimeout_s + 3, "rank %d: took %.1f s to fail", rank, elapsed);
        RANK_CHECK(msg.find("root 1") != std::string::npos && msg.find("commIds[1]") != std::string::npos,
                   "rank %d: error does not name root 1 / commIds[1]: \"%s\"", rank, msg.c_str());
        // Ranks 2 and 3 report to root 1 itself: refused at once, not at the timeout.
        if (rank >= 2)
          RANK_CHECK(elapsed < kInitTimeout_s && msg.find("refused") != std::string::npos,
                     "rank %d: %.1f s, \"%s\"", rank, elapsed, msg.c_str());
        return 0;
      },
      options(1, IdMode::kNone));
  INFO(result.describe());
  CHECK(result.allOk());
  system(("rm -rf " + dir).c_str());
}

TEST_CASE("a rank of root 1's block that never joins is named on the ranks of root 0 too",
          "[multiproc][init][scalable][faults]") {
  RunResult result = runRanks(
      4,
      [](int rank, int n, const ncclUniqueId&) {
        if (rank == 3) return 0;
        std::vector<ncclUniqueId> ids = rankIds();
        ncclComm_t comm = nullptr;
        const double t0 = monotonicSeconds();
        ncclResult_t r = gyreCommInitRankScalableHost(&comm, n, rank, 2, ids.data(), nullptr);
        const double elapsed = monotonicSeconds() - t0;
        const std::string msg = lastError();
        RANK_CHECK(r != ncclSuccess, "rank %d: init succeeded without rank 3", rank);
        RANK_CHECK(elapsed < 3 * kInitTimeout_s + 3, "rank %d: took %.1f s to fail", rank, elapsed);
        RANK_CHECK(containsWord(msg, "rank 3") && msg.find("did not join") != std::string::npos,
                   "rank %d: error does not say \"rank 3 ... did not join\": \"%s\"", rank, msg.c_str());
        return 0;
      },
      options(2));
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("nId larger than nranks, and two copies of one id, are refused before any connection",
          "[multiproc][init][scalable]") {
  RunResult result = runRanks(
      1,
      [](int rank, int n, const ncclUniqueId& id) {
        std::vector<ncclUniqueId> ids = {id, id};
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankScalableHost(&comm, n, rank, 2, ids.data(), nullptr) == ncclInvalidArgument,
                   "nId 2 > nranks 1 was accepted");
        RANK_CHECK(lastError().find("nId=2") != std::string::npos, "\"%s\"", lastError().c_str());
        return 0;
      },
      options(1));
  INFO(result.describe());
  CHECK(result.allOk());
  RunResult dup = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        std::vector<ncclUniqueId> ids = {id, id};
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankScalableHost(&comm, n, rank, 2, ids.data(), nullptr) == ncclInvalidArgument,
                   "the same id twice was accepted");
        RANK_CHECK(lastError().find("same root") != std::string::npos, "\"%s\"", lastError().c_str());
        return 0;
      },
      options(1));
  INFO(dup.describe());
  CHECK(dup.allOk());
}

TEST_CASE("a nonblocking init through 2 roots reports ncclInProgress, then success, and its AllReduce is exact",
          "[multiproc][init][scalable]") {
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId&) {
        std::vector<ncclUniqueId> ids = rankIds();
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankScalableHost(&comm, n, rank, 2, ids.data(), &config);
        RANK_CHECK(r == ncclInProgress || r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r),
                   lastError().c_str());
        ncclResult_t state = ncclInProgress;
        const double until = monotonicSeconds() + 20;
        while (state == ncclInProgress && monotonicSeconds() < until) {
          RANK_CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess, "rank %d: ncclCommGetAsyncError", rank);
          usleep(1000);
        }
        RANK_CHECK(state == ncclSuccess, "rank %d: nonblocking init ended in %d: %s", rank, int(state),
                   lastError().c_str());
        if (checkAllReduce(comm, rank, n) != 0) return 1;
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options(2));
  INFO(result.describe());
  CHECK(result.allOk());
}
