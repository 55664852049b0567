// The IB network on the fake verbs provider (GYRE_IBVERBS_LIB, set by
// tests/net/meson.build): every collective over 2 and 3 ranks with
// NCCL_NET=IB and shared memory off, 1 and 2 QPs per connection, IB and RoCE
// ports; the QP attributes the settings ask for; no QP, CQ or memory region
// left after ncclCommDestroy; injected faults (a QP error, a port down,
// ibv_reg_mr failing, an asynchronous port or QP event) end in an error on
// every rank, within the timeout; an asynchronous event well before it.
// There is no RDMA hardware here: this tests gyre's protocol and error paths
// against the fake, not a real HCA.
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <stdlib.h>

#include <string>

#include "net_test_util.h"

namespace {

using namespace gyre::nettest;

using Env = std::vector<std::pair<std::string, std::optional<std::string>>>;

void* fakeLib() { return dlopen(getenv("GYRE_IBVERBS_LIB"), RTLD_NOW | RTLD_NOLOAD); }

struct FakeCounts {
  long mrs = -1, qps = -1, cqs = -1, pds = -1, regs = -1, sends = -1;
};

FakeCounts fakeCounts() {
  FakeCounts c;
  void* lib = fakeLib();
  if (!lib) return c;
  auto fn = reinterpret_cast<void (*)(long*, long*, long*, long*, long*, long*)>(dlsym(lib, "fakeverbs_counts"));
  fn(&c.mrs, &c.qps, &c.cqs, &c.pds, &c.regs, &c.sends);
  dlclose(lib);
  return c;
}

// Runs every collective at every count; records the QP attributes the fake saw.
RunResult runCollectives(int nranks, const Env& extra, const std::string& logDir) {
  RankOptions options;
  options.timeout_s = 90;
  options.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "IB"},   {"GYRE_TIMEOUT", "20"},
                 {"GYRE_INIT_TIMEOUT", "20"}, {"NCCL_BUFFSIZE", "262144"}, {"NCCL_DEBUG", "INFO"},
                 {"NCCL_DEBUG_SUBSYS", "INIT,NET"}, {"NCCL_DEBUG_FILE", logDir + "/log.%p"}};
  options.env.insert(options.env.end(), extra.begin(), extra.end());
  return runRanks(
      nranks,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        rankProgress("init");
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        for (size_t count : netCounts()) {
          rankProgress("count " + std::to_string(count));
          if (!checkEveryCollective(comm, rank, n, count)) return 1;
        }
        const FakeCounts during = fakeCounts();
        RANK_CHECK(during.sends > 0 && during.qps > 0, "rank %d: the fake provider saw %ld QPs and %ld post_sends",
                   rank, during.qps, during.sends);
        void* lib = fakeLib();
        auto attr = reinterpret_cast<void (*)(int*, int*, int*, int*, int*, int*)>(
            dlsym(lib, "fakeverbs_last_qp_attr"));
        int timeout, retry, sl, tc, gid, global;
        attr(&timeout, &retry, &sl, &tc, &gid, &global);
        rankRecord("attr", std::to_string(timeout) + "," + std::to_string(retry) + "," + std::to_string(sl) + "," +
                               std::to_string(tc) + "," + std::to_string(gid) + "," + std::to_string(global));
        dlclose(lib);
        r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "rank %d: destroy returned %d: %s", rank, int(r), lastError().c_str());
        const FakeCounts after = fakeCounts();
        RANK_CHECK(after.mrs == 0 && after.qps == 0 && after.cqs == 0,
                   "rank %d: after ncclCommDestroy the fake holds %ld MRs, %ld QPs, %ld CQs", rank, after.mrs,
                   after.qps, after.cqs);
        return 0;
      },
      options);
}

std::string logsOf(const std::string& dir) {
  std::string all;
  for (const std::string& f : filesIn(dir)) all += readFile(f);
  return all;
}

std::string freshDir(const char* tag) {
  const std::string d = std::string("/tmp/gyre_net_ib_") + tag + "_" + std::to_string(getpid());
  REQUIRE(system(("rm -rf " + d + " && mkdir -p " + d).c_str()) == 0);
  return d;
}

// Init (and one AllReduce when init works) on `n` ranks; the per-rank error texts.
RunResult runFaulty(int n, const Env& env, const std::function<Env(int)>& rankEnv, double timeout_s) {
  RankOptions options;
  options.timeout_s = timeout_s;
  options.idMode = rankEnv ? IdMode::kEnvCommId : IdMode::kParent;
  options.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "IB"}, {"GYRE_TIMEOUT", "8"}, {"GYRE_INIT_TIMEOUT", "10"},
                 {"NCCL_BUFFSIZE", "262144"}};
  options.env.insert(options.env.end(), env.begin(), env.end());
  if (rankEnv) options.rankEnv = rankEnv;
  return runRanks(
      n,
      [](int rank, int nr, const ncclUniqueId& given) {
        ncclUniqueId id = given;
        if (getenv("NCCL_COMM_ID") && ncclGetUniqueId(&id) != ncclSuccess) {
          rankRecord("error", "ncclGetUniqueId: " + lastError());
          return 0;
        }
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, nr, id, rank, nullptr);
        if (r != ncclSuccess) {
          rankRecord("error", "init: " + lastError());
          return 0;
        }
        std::vector<int32_t> v(100000, rank);
        for (int i = 0; i < 20 && r == ncclSuccess; ++i)
          r = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr);
        rankRecord("error", r == ncclSuccess ? "" : "allreduce: " + lastError());
        ncclCommAbort(comm);
        return 0;
      },
      options);
}

int threadsOfProcess() { return static_cast<int>(filesIn("/proc/self/task").size()); }

// AllReduces on 3 ranks with GYRE_TIMEOUT=40 while rank 1's device raises
// the asynchronous event `kind` at its 30th data write and its link goes
// dark (writes vanish, nothing completes): only the event can end rank 1's
// wait before the timeout. Records each rank's error, how long its calls
// took, and its thread count before init and after ncclCommAbort.
RunResult runAsyncEvent(const std::string& kind) {
  RankOptions options;
  options.timeout_s = 60;
  options.env = {{"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "IB"},         {"GYRE_TIMEOUT", "40"},
                 {"GYRE_INIT_TIMEOUT", "10"}, {"NCCL_BUFFSIZE", "262144"}, {"NCCL_IB_HCA", "=fake_ib0:1"}};
  options.rankEnv = [kind](int rank) {
    return rank == 1 ? Env{{"FAKEVERBS_ASYNC_EVENT", kind}, {"FAKEVERBS_ASYNC_AFTER", "30"}} : Env{};
  };
  return runRanks(
      3,
      [](int rank, int nr, const ncclUniqueId& id) {
        const int threadsBefore = threadsOfProcess();
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, nr, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        std::vector<int32_t> v(100000, rank);
        const double start = monotonicSeconds();
        for (int i = 0; i < 50 && r == ncclSuccess; ++i)
          r = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr);
        rankRecord("seconds", std::to_string(monotonicSeconds() - start));
        rankRecord("error", r == ncclSuccess ? "" : lastError());
        ncclCommAbort(comm);
        // Threads end asynchronously only in the kernel's bookkeeping: give it a moment.
        for (int i = 0; i < 100 && threadsOfProcess() != threadsBefore; ++i) usleep(10000);
        rankRecord("threads", std::to_string(threadsBefore) + " -> " + std::to_string(threadsOfProcess()));
        return 0;
      },
      options);
}

void expectAsyncEventEndsEveryRank(const RunResult& r, const std::string& event) {
  INFO(r.describe());
  for (const RankOutcome& o : r.ranks) {
    const std::string e = o.records.count("error") ? o.records.at("error") : "";
    const std::string secs = o.records.count("seconds") ? o.records.at("seconds") : "?";
    INFO("rank " << o.rank << " after " << secs << " s: " << e);
    CHECK(o.ok());
    CHECK(!e.empty());
    CHECK(atof(secs.c_str()) < 20);  // GYRE_TIMEOUT is 40
    const std::string threads = o.records.count("threads") ? o.records.at("threads") : "";
    const size_t arrow = threads.find(" -> ");
    INFO("threads " << threads);
    REQUIRE(arrow != std::string::npos);
    CHECK(threads.substr(0, arrow) == threads.substr(arrow + 4));  // the event thread was joined
  }
  const std::string e1 = r.ranks[1].records.at("error");
  INFO(e1);
  CHECK(e1.find(event) != std::string::npos);
  CHECK(e1.find("fake_ib0") != std::string::npos);
  CHECK(e1.find("port 1") != std::string::npos);
  CHECK(e1.find("ncclAllReduce #") != std::string::npos);  // the call, the connection and its peer rank
  CHECK(e1.find(" rank ") != std::string::npos);
}

}  // namespace

TEST_CASE("a port error raised asynchronously ends every rank's calls long before the timeout, the rank that got it "
          "naming the device, the port and the event, and leaves no thread",
          "[ib][fault][async]") {
  expectAsyncEventEndsEveryRank(runAsyncEvent("PORT_ERR"), "IBV_EVENT_PORT_ERR");
}

TEST_CASE("a QP raising IBV_EVENT_QP_FATAL ends every rank's calls long before the timeout, naming the device, the "
          "port, the QP and the event",
          "[ib][fault][async]") {
  RunResult r = runAsyncEvent("QP_FATAL");
  expectAsyncEventEndsEveryRank(r, "IBV_EVENT_QP_FATAL");
  CHECK(r.ranks[1].records["error"].find(", QP ") != std::string::npos);
}

TEST_CASE("every collective over 2 ranks is exact over NCCL_NET=IB on the fake provider, leaving no QP or MR",
          "[ib]") {
  const std::string dir = freshDir("two");
  RunResult result = runCollectives(2, {}, dir);
  INFO(result.describe());
  CHECK(result.allOk());
  const std::string logs = logsOf(dir);
  INFO(logs.substr(0, 3000));
  CHECK(logs.find("via NET/IB/0") != std::string::npos);
  CHECK(logs.find("via NET/IB/1") != std::string::npos);  // channel 1 on the second port
  CHECK(logs.find("using network IB") != std::string::npos);
  (void)system(("rm -rf " + dir).c_str());
}

TEST_CASE("every collective over 3 ranks is exact with 2 QPs per connection striping each message", "[ib]") {
  const std::string dir = freshDir("qps");
  RunResult result = runCollectives(3, {{"NCCL_IB_QPS_PER_CONNECTION", "2"}, {"NCCL_IB_HCA", "=fake_ib0:1"}}, dir);
  INFO(result.describe());
  CHECK(result.allOk());
  const std::string logs = logsOf(dir);
  CHECK(logs.find("via NET/IB/0") != std::string::npos);
  CHECK(logs.find("via NET/IB/1") == std::string::npos);  // one port allowed
  (void)system(("rm -rf " + dir).c_str());
}

TEST_CASE("every collective over 4 ranks is exact over NCCL_NET=IB on RoCE ports with 2 QPs per connection",
          "[ib]") {
  const std::string dir = freshDir("four");
  RunResult result = runCollectives(4, {{"NCCL_IB_QPS_PER_CONNECTION", "2"}, {"NCCL_IB_HCA", "fake_roce0"}}, dir);
  INFO(result.describe());
  CHECK(result.allOk());
  (void)system(("rm -rf " + dir).c_str());
}

TEST_CASE("RoCE ports get a GRH with NCCL_IB_TC and the chosen GID; QPs get NCCL_IB_TIMEOUT, RETRY_CNT and SL",
          "[ib]") {
  const std::string dir = freshDir("roce");
  RunResult result = runCollectives(2,
                                    {{"NCCL_IB_HCA", "fake_roce0"}, {"NCCL_IB_TC", "106"}, {"NCCL_IB_SL", "3"},
                                     {"NCCL_IB_TIMEOUT", "18"}, {"NCCL_IB_RETRY_CNT", "5"}},
                                    dir);
  INFO(result.describe());
  REQUIRE(result.allOk());
  for (const RankOutcome& o : result.ranks) CHECK(o.records.at("attr") == "18,5,3,106,2,1");
  (void)system(("rm -rf " + dir).c_str());
}

TEST_CASE("NCCL_IB_GID_INDEX picks the GID and one beyond the table is an error naming it", "[ib]") {
  const std::string dir = freshDir("gid");
  RunResult ok = runCollectives(2, {{"NCCL_IB_HCA", "=fake_roce0:2"}, {"NCCL_IB_GID_INDEX", "1"}}, dir);
  INFO(ok.describe());
  REQUIRE(ok.allOk());
  CHECK(ok.ranks[0].records.at("attr").find(",1,1") != std::string::npos);  // sgid_index 1, global
  (void)system(("rm -rf " + dir).c_str());
  RunResult bad = runFaulty(2, {{"NCCL_IB_HCA", "fake_roce0"}, {"NCCL_IB_GID_INDEX", "9"}}, nullptr, 30);
  INFO(bad.describe());
  const std::string e = bad.ranks[0].records["error"];
  INFO(e);
  CHECK(e.find("NCCL_IB_GID_INDEX=9") != std::string::npos);
  CHECK(e.find("fake_roce0:1") != std::string::npos);
}

TEST_CASE("NCCL_IB_HCA allowing no active port fails init listing the ports that exist", "[ib]") {
  RunResult r = runFaulty(2, {{"NCCL_IB_HCA", "mlx5"}}, nullptr, 30);
  INFO(r.describe());
  const std::string e = r.ranks[0].records["error"];
  INFO(e);
  CHECK(e.find("NCCL_IB_HCA=mlx5") != std::string::npos);
  CHECK(e.find("fake_ib0:1") != std::string::npos);
  CHECK(e.find("fake_roce0:2") != std::string::npos);
}

TEST_CASE("a port that is down is not used; the only allowed port down leaves NCCL_NET=IB an error", "[ib][fault]") {
  RunResult r = runFaulty(2, {{"NCCL_IB_HCA", "=fake_ib0:1"}, {"FAKEVERBS_PORT_DOWN", "fake_ib0:1"}}, nullptr, 30);
  INFO(r.describe());
  const std::string e = r.ranks[0].records["error"];
  INFO(e);
  CHECK(e.find("NCCL_IB_HCA==fake_ib0:1") != std::string::npos);
  CHECK(e.find("fake_ib0:1 (IB)") == std::string::npos);  // not listed as active
}

TEST_CASE("ibv_reg_mr failing with ENOMEM fails set-up on every rank, naming the device and the errno text",
          "[ib][fault]") {
  RunResult r = runFaulty(2, {{"FAKEVERBS_REG_MR_ENOMEM", "1"}}, nullptr, 60);
  INFO(r.describe());
  bool named = false;
  for (const RankOutcome& o : r.ranks) {
    const std::string e = o.records.count("error") ? o.records.at("error") : "";
    INFO("rank " << o.rank << ": " << e);
    CHECK(o.ok());
    CHECK(!e.empty());
    named |= e.find("Cannot allocate memory") != std::string::npos && e.find("fake_ib0") != std::string::npos;
  }
  CHECK(named);
}

TEST_CASE("one rank whose ibv_reg_mr fails makes every rank's init fail within GYRE_INIT_TIMEOUT", "[ib][fault]") {
  const double start = monotonicSeconds();
  RunResult r = runFaulty(3, {}, [](int rank) { return rank == 1 ? Env{{"FAKEVERBS_REG_MR_ENOMEM", "1"}} : Env{}; },
                          60);
  INFO(r.describe());
  CHECK(monotonicSeconds() - start < 40);
  for (const RankOutcome& o : r.ranks) {
    const std::string e = o.records.count("error") ? o.records.at("error") : "";
    INFO("rank " << o.rank << ": " << e);
    CHECK(o.ok());
    CHECK(!e.empty());
  }
}

TEST_CASE("a QP that enters the error state mid-collective fails every rank within the timeout, the failing rank "
          "naming the device, the peer and the verbs status",
          "[ib][fault]") {
  const double start = monotonicSeconds();
  RunResult r = runFaulty(3, {}, [](int rank) {
    return rank == 1 ? Env{{"FAKEVERBS_QP_ERROR_AFTER", "40"}} : Env{};
  }, 60);
  INFO(r.describe());
  CHECK(monotonicSeconds() - start < 45);
  for (const RankOutcome& o : r.ranks) {
    CHECK(o.ok());
    const std::string e = o.records.count("error") ? o.records.at("error") : "";
    INFO("rank " << o.rank << ": " << e);
    CHECK(!e.empty());
    CHECK(e.find("rank ") != std::string::npos);
  }
  const std::string e1 = r.ranks[1].records["error"];
  INFO("rank 0: " << r.ranks[0].records["error"]);
  INFO("rank 1: " << e1);
  INFO("rank 2: " << r.ranks[2].records["error"]);
  // The QP in error completes the failing write with a retry error and flushes
  // every other posted request; which completion rank 1 polls first is a
  // race (a flushed receive came first in one CI run).
  auto namesVerbsFailure = [](const std::string& e) {
    return (e.find("transport retry counter exceeded") != std::string::npos ||
            e.find("work request flushed") != std::string::npos) &&
           e.find("fake_ib0") != std::string::npos;
  };
  // The peers' QPs to rank 1 are flushed too, and one of them may report
  // first and give up on rank 1 before rank 1's own completion error
  // surfaces (seen in CI under load). Then that peer's error names the
  // device, the verbs status and its link from or to rank 1, also when all it
  // saw was its receive from rank 1 flushed (a link that failed, not a peer
  // that left).
  if (e1.find("gave up on this rank") != std::string::npos) {
    bool peerNamed = false;
    for (int p : {0, 2}) {
      const std::string e = r.ranks[p].records["error"];
      peerNamed |= namesVerbsFailure(e) && e.find("rank 1 (") != std::string::npos;
    }
    CHECK(peerNamed);
    return;
  }
  CHECK(namesVerbsFailure(e1));
  // From 256 KiB a 3-rank AllReduce runs two rings, the second reversed:
  // whichever QP reports first, the error names its channel and peer.
  bool named = false;
  for (const char* link : {"NET/IB/0 to rank 2", "NET/IB/1 to rank 0", "NET/IB/0 from rank 0", "NET/IB/1 from rank 2"})
    named |= e1.find(link) != std::string::npos;
  CHECK(named);
}

TEST_CASE("ports going down mid-collective fail every rank within the timeout, the rank that lost them naming the "
          "verbs status",
          "[ib][fault]") {
  const double start = monotonicSeconds();
  RunResult r = runFaulty(3, {}, [](int rank) {
    return rank == 2 ? Env{{"FAKEVERBS_PORT_DOWN_AFTER", "30"}} : Env{};
  }, 60);
  INFO(r.describe());
  CHECK(monotonicSeconds() - start < 45);
  for (const RankOutcome& o : r.ranks) {
    const std::string e = o.records.count("error") ? o.records.at("error") : "";
    INFO("rank " << o.rank << ": " << e);
    CHECK(o.ok());
    CHECK(!e.empty());
    CHECK(e.find("rank ") != std::string::npos);
  }
  // The send that hit the dead port completes with "retry counter exceeded";
  // the QP then flushes its other requests. A rank waiting on a receive at
  // that moment reports the flushed receive first (seen once under load).
  // And a peer that saw the link drop may give up on rank 2 before rank 2's
  // own completion error surfaces (seen in the fault matrix's twin of this
  // case): then rank 2 names that peer.
  const std::string e2 = r.ranks[2].records["error"];
  INFO(e2);
  const bool toldFirst = e2.find("gave up on this rank") != std::string::npos;
  CHECK((toldFirst || e2.find("transport retry counter exceeded") != std::string::npos ||
         e2.find("work request flushed") != std::string::npos));
  CHECK((toldFirst || e2.find("fake_ib0") != std::string::npos));
}

TEST_CASE("slow completions (300 us each) still give exact collectives over 3 ranks", "[ib]") {
  const std::string dir = freshDir("slow");
  RunResult result = runCollectives(3, {{"FAKEVERBS_DELAY_US", "300"}, {"NCCL_IB_HCA", "=fake_ib0:1"}}, dir);
  INFO(result.describe());
  CHECK(result.allOk());
  (void)system(("rm -rf " + dir).c_str());
}

TEST_CASE("a device communicator over IB stages its GPU buffers through host memory, exactly, and its log says why",
          "[ib][gpudirect]") {
  const std::string dir = freshDir("gdr");
  RankOptions options;
  options.timeout_s = 60;
  // The fake CUDA runtime: host memory stands in for device memory.
  options.env = {{"GYRE_FAKE_CUDA", "1"},      {"NCCL_SHM_DISABLE", "1"},      {"NCCL_P2P_DISABLE", "1"},
                 {"NCCL_NET", "IB"},           {"GYRE_TIMEOUT", "20"},         {"GYRE_INIT_TIMEOUT", "20"},
                 {"NCCL_DEBUG", "INFO"},       {"NCCL_DEBUG_SUBSYS", "INIT,NET"}, {"NCCL_DEBUG_FILE", dir + "/log.%p"}};
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = ncclCommInitRank(&comm, n, id, rank);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());
        std::vector<int32_t> in(4096, rank + 1), v(4096, -7);
        r = ncclAllReduce(in.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: allreduce returned %d: %s", rank, int(r), lastError().c_str());
        r = ncclCommDestroy(comm);  // waits for the stream's work
        RANK_CHECK(r == ncclSuccess, "rank %d: destroy returned %d: %s", rank, int(r), lastError().c_str());
        RANK_CHECK(v[0] == 3 && v[4095] == 3, "rank %d: sum %d %d, expected 3", rank, v[0], v[4095]);
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
  const std::string all = logsOf(dir);
  INFO(all.substr(0, 4000));
  CHECK(all.find("via NET/IB/") != std::string::npos);
  CHECK(all.find("NET/IB: GPU buffers are staged through pinned host memory: ") != std::string::npos);
  // The fake runtime's ranks have no GPU in the topology: that is the first reason.
  CHECK(all.find("no path from this rank's GPU to a NIC") != std::string::npos);
  (void)system(("rm -rf " + dir).c_str());
}
