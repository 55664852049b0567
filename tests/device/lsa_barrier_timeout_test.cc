// An LSA barrier that times out gives every thread of its group the same
// result (include/nccl_device/lsa_barrier.h). The group here is two host
// threads of one rank with a real barrier between them, as a CTA's threads
// would run the session: each watches its own peers, so without agreement
// the thread whose peer arrived would pass while the other gave up.
#include <atomic>
#include <barrier>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "coll_common.h"
#include "include/nccl_device.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

// Thread `r` of a group of `n` host threads that meet at `meet`.
struct HostThreads {
  int r, n;
  std::barrier<>* meet;
  int thread_rank() const { return r; }
  int size() const { return n; }
  int num_threads() const { return n; }
  void sync() { meet->arrive_and_wait(); }
};

RankOptions barrierOptions() {
  RankOptions o;
  o.timeout_s = 60;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}};
  return o;
}

}  // namespace

TEST_CASE("an LSA barrier that times out for one thread of a group times out for every thread of it, though "
          "another thread's peers all arrived",
          "[device][device_api]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    const int n = 3;
    std::vector<ncclComm_t> comms(n);
    std::vector<int> devices(n, 0);
    RANK_CHECK(ncclCommInitAll(comms.data(), n, devices.data()) == ncclSuccess, "init: %s", lastError().c_str());
    const size_t bytes = 4096;
    std::vector<void*> bufs(n);
    for (int r = 0; r < n; ++r)
      RANK_CHECK(ncclMemAlloc(&bufs[r], bytes) == ncclSuccess, "alloc: %s", lastError().c_str());
    std::atomic<bool> rank1Arrived{false};
    ncclResult_t seen[2] = {ncclInternalError, ncclInternalError};
    std::vector<std::string> setup(n);
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r)
      ranks.emplace_back([&, r] {
        ncclWindow_t win = nullptr;
        if (ncclCommWindowRegister(comms[r], bufs[r], bytes, &win, NCCL_WIN_COLL_SYMMETRIC) != ncclSuccess) {
          setup[r] = std::string("register: ") + ncclGetLastError(nullptr);
          return;
        }
        ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
        reqs.lsaBarrierCount = 1;
        ncclDevComm dev;
        if (ncclDevCommCreate(comms[r], &reqs, &dev) != ncclSuccess) {
          setup[r] = std::string("ncclDevCommCreate: ") + ncclGetLastError(nullptr);
          return;
        }
        if (r == 1) {  // arrives, never waits
          ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), dev, ncclTeamTagLsa(), 0};
          bar.arrive(ncclCoopCta(), cuda::memory_order_release);
          rank1Arrived = true;
        }
        if (r == 0) {
          // Thread 0 watches ranks 0 and 2 (rank 2 never arrives), thread 1
          // rank 1, which has arrived.
          while (!rank1Arrived.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          std::barrier<> meet(2);
          std::vector<std::thread> group;
          for (int t = 0; t < 2; ++t)
            group.emplace_back([&, t] {
              HostThreads coop{t, 2, &meet};
              ncclLsaBarrierSession<HostThreads> bar{coop, dev, ncclTeamTagLsa(), 0};
              seen[t] = bar.sync(coop, cuda::memory_order_acq_rel, 300ull * 1000 * 1000);  // 0.3 s on the host
            });
          for (auto& g : group) g.join();
        }
        ncclDevCommDestroy(comms[r], &dev);
        ncclCommWindowDeregister(comms[r], win);
      });
    for (auto& t : ranks) t.join();
    for (int r = 0; r < n; ++r) RANK_CHECK(setup[r].empty(), "rank %d: %s", r, setup[r].c_str());
    RANK_CHECK(seen[0] == ncclTimeout, "the thread whose peer never arrived got %d, not ncclTimeout", int(seen[0]));
    RANK_CHECK(seen[1] == seen[0], "the group's threads disagree: thread 0 got %d, thread 1 %d", int(seen[0]),
               int(seen[1]));
    for (int r = 0; r < n; ++r) {
      RANK_CHECK(ncclCommDestroy(comms[r]) == ncclSuccess, "destroy: %s", lastError().c_str());
      RANK_CHECK(ncclMemFree(bufs[r]) == ncclSuccess, "free");
    }
    return 0;
  }, barrierOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}
