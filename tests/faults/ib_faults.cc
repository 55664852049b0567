// The fault matrix's InfiniBand rows, on the fake verbs provider
// (tests/net/fake_verbs.cc, loaded through GYRE_IBVERBS_LIB with NCCL_NET=IB):
// a QP that enters the error state mid-collective, ports going down
// mid-collective, the only allowed port down at init, and ibv_reg_mr failing
// with ENOMEM. Every rank must fail within the timeout naming a rank (or the
// device), and after ncclCommAbort hold no fds, threads, QPs or registered
// memory regions. scripts/fault-matrix sets GYRE_IBVERBS_LIB, or lists these
// rows as skipped when the fake library was not built.
#include <catch2/catch.hpp>
#include <stdlib.h>

#include <functional>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "fault_row.h"

namespace {

using namespace gyre::test;
using Env = std::vector<std::pair<std::string, std::optional<std::string>>>;

constexpr int kTimeout_s = 8;

// Runs `n` ranks with `env` (plus `rankEnv` per rank): init, 20 AllReduces of
// 400 KB, then ncclCommAbort. `faultRank` records the fault time (before init
// for set-up faults, before the AllReduces otherwise).
void runIbCase(const char* name, int n, const Env& env, const std::function<Env(int)>& rankEnv, int faultRank,
               bool initFault, const char* victimSays) {
  REQUIRE(getenv("GYRE_IBVERBS_LIB") != nullptr);
  RankOptions o;
  o.timeout_s = 60;
  o.idMode = rankEnv ? IdMode::kEnvCommId : IdMode::kParent;
  o.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "IB"}, {"GYRE_TIMEOUT", std::to_string(kTimeout_s)},
           {"GYRE_INIT_TIMEOUT", std::to_string(kTimeout_s)}, {"NCCL_BUFFSIZE", "262144"}};
  o.env.insert(o.env.end(), env.begin(), env.end());
  if (rankEnv) o.rankEnv = rankEnv;
  const int shm = gyreShmSegments();
  const double start = monotonicSeconds();
  RunResult result = runRanks(
      n,
      [=](int rank, int nr, const ncclUniqueId& given) {
        const Baseline b = takeBaseline();
        ncclUniqueId id = given;
        if (getenv("NCCL_COMM_ID"))
          RANK_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId: %s", lastError().c_str());
        if (initFault && rank == faultRank) recordFaultTime();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, nr, id, rank, nullptr);
        std::vector<int32_t> v(100000, rank);
        if (r == ncclSuccess && rank == faultRank) recordFaultTime();
        for (int i = 0; i < 20 && r == ncclSuccess; ++i)
          r = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr);
        const std::string msg = lastError();
        recordOutcome(r, msg);
        if (comm) ncclCommAbort(comm);
        RANK_CHECK(r != ncclSuccess, "rank %d: the job finished despite the fault", rank);
        RANK_CHECK(msg.find("rank ") != std::string::npos || msg.find("fake_ib0") != std::string::npos,
                   "rank %d: the error names no rank and no device: %s", rank, msg.c_str());
        // The rank at fault names the verbs status, unless a peer that saw
        // the link drop first gave up on it and said so before its own
        // completion error surfaced (a race seen in CI: its error then names
        // that peer). A QP in error also flushes its other requests, and a
        // flushed receive may be the completion polled first (net_ib_test).
        if (rank == faultRank && victimSays)
          RANK_CHECK(msg.find(victimSays) != std::string::npos || msg.find("work request flushed") != std::string::npos ||
                         msg.find("gave up on this rank") != std::string::npos,
                     "rank %d: the error does not say \"%s\": %s", rank, victimSays, msg.c_str());
        long mrs = 0, qps = 0, contexts = 0;
        const std::string verbs = verbsLeft(&mrs, &qps, &contexts);
        // gyre opens the verbs devices once per process and keeps them, as
        // NCCL does; each fake context holds one descriptor. Those are not
        // the communicator's: everything else must be gone.
        Baseline withDevices = b;
        withDevices.fds += static_cast<int>(contexts);
        const std::string left = recordLeftovers(withDevices);
        const int fds = countOpenFds() - withDevices.fds, threads = countThreads() - b.threads;
        // printRow reports a rank as clean when its record starts with "0 fds
        // (0 sockets), 0 threads": verbs objects left go in front of that.
        const std::string counts = std::to_string(fds) + " fds (" + std::to_string(countSockets() - b.sockets) +
                                   " sockets), " + std::to_string(threads) + " threads";
        const std::string devices = contexts ? " (" + std::to_string(contexts) + " device contexts kept open)" : "";
        rankRecord("left", mrs || qps ? verbs.substr(2) + "; " + counts + devices : counts + verbs + devices);
        RANK_CHECK(left.empty(), "rank %d: after ncclCommAbort: %s", rank, left.c_str());
        RANK_CHECK(mrs == 0 && qps == 0, "rank %d: %ld MRs and %ld QPs left after ncclCommAbort", rank, mrs, qps);
        return 0;
      },
      o);
  printRow(name, result, shm);
  INFO(name);
  INFO(result.describe());
  CHECK(result.allOk());
  CHECK(monotonicSeconds() - start < 45);
}

}  // namespace

TEST_CASE("IB: a QP entering the error state mid-AllReduce fails every rank, the failing rank naming the status",
          "[faults][ib]") {
  runIbCase("IB: QP error mid-AllReduce (fake verbs, 3 ranks)", 3, {},
            [](int rank) { return rank == 1 ? Env{{"FAKEVERBS_QP_ERROR_AFTER", "40"}} : Env{}; }, 1, false,
            "transport retry counter exceeded");
}

TEST_CASE("IB: ports going down mid-AllReduce fail every rank within the timeout", "[faults][ib]") {
  runIbCase("IB: ports down mid-AllReduce (fake verbs, 3 ranks)", 3, {},
            [](int rank) { return rank == 2 ? Env{{"FAKEVERBS_PORT_DOWN_AFTER", "30"}} : Env{}; }, 2, false,
            "transport retry counter exceeded");
}

TEST_CASE("IB: the only allowed port down at init fails every rank naming NCCL_IB_HCA", "[faults][ib]") {
  runIbCase("IB: only allowed port down at init (fake verbs, 2 ranks)", 2,
            {{"NCCL_IB_HCA", "=fake_ib0:1"}, {"FAKEVERBS_PORT_DOWN", "fake_ib0:1"}}, nullptr, 0, true,
            "NCCL_IB_HCA");
}

TEST_CASE("IB: ibv_reg_mr failing with ENOMEM fails every rank's set-up", "[faults][ib]") {
  runIbCase("IB: ibv_reg_mr ENOMEM at set-up (fake verbs, 2 ranks)", 2, {{"FAKEVERBS_REG_MR_ENOMEM", "1"}}, nullptr,
            0, true, nullptr);
}
