// Nonblocking communicator init (ncclConfig_t.blocking = 0): the call returns
// ncclInProgress at once, ncclCommGetAsyncError reports ncclInProgress until
// set-up finishes, collectives are refused until then, and a set-up that
// fails (a rank never joins) ends in an error, not a hang, with a
// communicator that can still be destroyed.
#include <thread>

#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

// Polls until init leaves ncclInProgress or `seconds` pass.
ncclResult_t waitInit(ncclComm_t comm, double seconds) {
  double end = monotonicSeconds() + seconds;
  ncclResult_t state = ncclInProgress;
  while (monotonicSeconds() < end) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state != ncclInProgress) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ncclInProgress;
}

RankOptions options() {
  RankOptions o;
  o.timeout_s = 40;
  o.env = {{"GYRE_INIT_TIMEOUT", "3"}, {"GYRE_TIMEOUT", "10"}};
  return o;
}

}  // namespace

TEST_CASE("nonblocking init returns ncclInProgress, refuses collectives until ready, then works",
          "[init][nonblocking]") {
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(500));  // keep the others waiting
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, &config);
        RANK_CHECK(r == ncclInProgress || r == ncclSuccess, "init returned %d: %s", int(r), lastError().c_str());
        RANK_CHECK(comm != nullptr, "no communicator handed out");
        float x = float(rank + 1);
        if (rank == 0) {
          // Rank 2 has not even started: set-up cannot have finished.
          ncclResult_t early = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
          RANK_CHECK(early == ncclInvalidUsage, "a collective during init returned %d", int(early));
          RANK_CHECK(lastError().find("still initialising") != std::string::npos, "error text: %s",
                     lastError().c_str());
        }
        ncclResult_t state = waitInit(comm, 15);
        RANK_CHECK(state == ncclSuccess, "init ended in %d: %s", int(state), ncclGetLastError(comm));
        RANK_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "allreduce: %s",
                   lastError().c_str());
        RANK_CHECK(x == 6.f, "allreduce gave %g", x);
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("nonblocking init with a rank that never joins fails through ncclCommGetAsyncError",
          "[init][nonblocking][faults]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        if (rank == 1) return 0;  // never calls init
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, &config);
        RANK_CHECK(r == ncclInProgress, "init returned %d: %s", int(r), lastError().c_str());
        ncclResult_t state = waitInit(comm, 20);
        RANK_CHECK(state != ncclInProgress, "init still in progress after 20 s (GYRE_INIT_TIMEOUT=3)");
        RANK_CHECK(state != ncclSuccess, "init succeeded without rank 1");
        std::string text = ncclGetLastError(comm);
        RANK_CHECK(text.find("1") != std::string::npos, "the error does not name the missing rank: %s", text.c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy of a failed communicator: %s", lastError().c_str());
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("aborting a communicator whose nonblocking init is still waiting returns promptly",
          "[init][nonblocking][abort]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        if (rank == 1) return 0;
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t comm = nullptr;
        RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, &config) == ncclInProgress, "init: %s",
                   lastError().c_str());
        double start = monotonicSeconds();
        RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort: %s", lastError().c_str());
        RANK_CHECK(monotonicSeconds() - start < 2.5, "abort took %.1f s", monotonicSeconds() - start);
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}
