// A peer that finishes its part of a call and then fails: its abort notice
// reaches this rank together with the call's data, and on another channel it
// can be read before that data. The call this rank is in must still complete
// with the right result (everything it needs arrived), and a later call must
// fail naming the peer, long before GYRE_TIMEOUT.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"

namespace {

using namespace gyre::test;

constexpr size_t kCount = 1031;          // floats broadcast: small enough to sit in the buffers whole
constexpr double kLateJoin_s = 2.5;      // rank 1 joins after rank 0's notice went out
constexpr double kRank0Stays_s = 6;      // rank 0 stays connected: the notice, not a close, must tell
constexpr double kFailureBound_s = 5;    // rank 1's next call fails within this

void expectLateJoinerCompletesThenFails(bool sockets) {
  RankOptions options;
  options.timeout_s = 40;
  options.env = {{"GYRE_TIMEOUT", "1"}, {"GYRE_INIT_TIMEOUT", "10"}, {"NCCL_MIN_NCHANNELS", "2"},
                 {"NCCL_MAX_NCHANNELS", "2"}};
  if (sockets) options.env.push_back({"NCCL_SHM_DISABLE", "1"});
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        std::vector<float> data(kCount);
        for (size_t i = 0; i < kCount; ++i) data[i] = rank == 0 ? float(i % 97) + 0.5f : -1.f;
        std::vector<float> sum(kCount, 1.f);

        if (rank == 0) {
          rankProgress("broadcast, completing without rank 1");
          r = ncclBroadcast(data.data(), data.data(), kCount, ncclFloat32, 0, comm, nullptr);
          RANK_CHECK(r == ncclSuccess, "rank 0: broadcast returned %d: %s", int(r), lastError().c_str());
          rankProgress("allreduce, timing out on rank 1");
          r = ncclAllReduce(sum.data(), sum.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
          RANK_CHECK(r != ncclSuccess, "rank 0: allreduce without rank 1 returned success");
          usleep(useconds_t(kRank0Stays_s * 1e6));
          ncclCommAbort(comm);
          return 0;
        }

        usleep(useconds_t(kLateJoin_s * 1e6));
        rankProgress("late broadcast");
        r = ncclBroadcast(data.data(), data.data(), kCount, ncclFloat32, 0, comm, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank 1: the broadcast rank 0 completed failed (%d): %s", int(r),
                   lastError().c_str());
        for (size_t i = 0; i < kCount; ++i)
          RANK_CHECK(data[i] == float(i % 97) + 0.5f, "rank 1: broadcast element %zu is %g", i, data[i]);

        // Rank 0 posted its part of the first AllReduce before it gave up, so
        // where that part is all rank 1 needs (two ranks, a small message) the
        // call may still complete, rightly. The second one rank 0 never made.
        std::string text;
        double waited = 0;
        for (int call = 1; call <= 2 && r == ncclSuccess; ++call) {
          rankProgress("allreduce " + std::to_string(call) + " after rank 0 gave up");
          std::fill(sum.begin(), sum.end(), 1.f);
          const double start = monotonicSeconds();
          r = ncclAllReduce(sum.data(), sum.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
          waited = monotonicSeconds() - start;
          text = lastError();
          if (r == ncclSuccess)
            RANK_CHECK(call == 1 && sum[0] == 2.f && sum[kCount - 1] == 2.f,
                       "rank 1: allreduce %d after rank 0 gave up returned success (sum %g)", call, sum[0]);
        }
        RANK_CHECK(r != ncclSuccess, "rank 1: no allreduce failed after rank 0 gave up");
        RANK_CHECK(text.find("rank 0") != std::string::npos, "rank 1: error does not name rank 0: %s", text.c_str());
        RANK_CHECK(waited < kFailureBound_s, "rank 1: the failing allreduce took %.1f s", waited);
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        RANK_CHECK(async != ncclSuccess, "rank 1: ncclCommGetAsyncError says success after the failure");
        ncclCommAbort(comm);
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace

TEST_CASE("a call whose data all arrived completes though the peer's notice came first (sockets)",
          "[faults]") {
  expectLateJoinerCompletesThenFails(true);
}

TEST_CASE("a call whose data all arrived completes though the peer's notice came first (shared memory)",
          "[faults]") {
  expectLateJoinerCompletesThenFails(false);
}
