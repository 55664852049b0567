// The entry points of NCCL 2.29-2.31 that gyre implements, on host
// communicators and (the _on_device_kernels run) fake-device ones:
// suspend/resume and memory statistics, growing a communicator, the
// per-collective config, collective window registration, and the one-sided
// operations and device-side queries gyre refuses by name.
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "coll_common.h"
#include "nccl_device.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

RankOptions options(double timeout = 40) {
  RankOptions o;
  o.timeout_s = timeout;
  o.env = {{"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "15"}};
  return o;
}

bool mentions(const char* word) { return lastError().find(word) != std::string::npos; }

// AllReduce (sum) of `count` int32 values that every rank can regenerate,
// checked against the exact sum; through ncclAllReduceConfig when `config`.
int checkAllReduce(ncclComm_t comm, int rank, int nranks, size_t count, uint64_t salt,
                   const ncclCollConfig_t* config = nullptr) {
  auto value = [&](int r, size_t i) { return int32_t((r + 1) * 1000003 + int64_t(i) * 7919 % 1000 + salt % 97); };
  std::vector<int32_t> in(count), out(count, -1);
  for (size_t i = 0; i < count; ++i) in[i] = value(rank, i);
  ncclResult_t r = config ? ncclAllReduceConfig(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr, config)
                          : ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr);
  RANK_CHECK(r == ncclSuccess, "allreduce of %zu: %s", count, lastError().c_str());
  for (size_t i = 0; i < count; ++i) {
    int64_t want = 0;
    for (int q = 0; q < nranks; ++q) want += value(q, i);
    RANK_CHECK(out[i] == int32_t(want), "element %zu is %d, expected %lld", i, out[i], (long long)want);
  }
  return 0;
}

int isHostComm(ncclComm_t comm) {
  int host = 0;
  gyreCommIsHost(comm, &host);
  return host;
}

}  // namespace

TEST_CASE("ncclCommSuspend refuses calls naming the state until ncclCommResume; misuse is named", "[suspend]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        if (checkAllReduce(comm, rank, n, 131, 1)) return 1;
        uint64_t v = 7;
        RANK_CHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 0, "suspended=%llu",
                   (unsigned long long)v);
        RANK_CHECK(ncclCommSuspend(comm, 0x4) == ncclInvalidArgument && mentions("NCCL_SUSPEND_MEM"), "flags 0x4: %s",
                   lastError().c_str());
        RANK_CHECK(ncclCommResume(comm) == ncclInvalidUsage && mentions("not suspended"), "resume before suspend");
        RANK_CHECK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == ncclSuccess, "suspend: %s", lastError().c_str());
        RANK_CHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 1, "suspended=%llu",
                   (unsigned long long)v);
        RANK_CHECK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM) == ncclInvalidUsage && mentions("already suspended"),
                   "second suspend: %s", lastError().c_str());
        float x = 1;
        RANK_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidUsage &&
                       mentions("suspended") && mentions("ncclCommResume"),
                   "allreduce while suspended: %s", lastError().c_str());
        RANK_CHECK(ncclCommResume(comm) == ncclSuccess, "resume: %s", lastError().c_str());
        RANK_CHECK(ncclCommResume(comm) == ncclInvalidUsage, "second resume accepted");
        RANK_CHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &v) == ncclSuccess && v == 0, "suspended=%llu",
                   (unsigned long long)v);
        if (checkAllReduce(comm, rank, n, 1009, 2)) return 1;
        // Byte counts: a host communicator holds no device memory; gyre does
        // not count a device communicator's and says so.
        ncclResult_t r = ncclCommMemStats(comm, ncclStatGpuMemTotal, &v);
        if (isHostComm(comm))
          RANK_CHECK(r == ncclSuccess && v == 0, "host total %llu (%d)", (unsigned long long)v, int(r));
        else
          RANK_CHECK(r == ncclInvalidUsage && mentions("ncclStatGpuMemSuspended"), "device total: %s",
                     lastError().c_str());
        RANK_CHECK(ncclCommMemStats(comm, ncclCommMemStat_t(9), &v) == ncclInvalidArgument, "stat 9 accepted");
        RANK_CHECK(ncclCommMemStats(comm, ncclStatGpuMemTotal, nullptr) == ncclInvalidArgument, "NULL accepted");
        RANK_CHECK(ncclCommSuspend(nullptr, 0) == ncclInvalidArgument, "NULL comm accepted");
        ncclCommDestroy(comm);
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ncclCommSuspend with a call in flight is refused, naming the call", "[suspend]") {
  if (testDeviceComms()) return;  // a device call returns once queued: nothing stays in flight on the host
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        std::vector<float> buf(4096, float(rank + 1));
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          RANK_CHECK(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr) ==
                         ncclSuccess, "allreduce: %s", lastError().c_str());
        } else {
          std::atomic<int> done{-1};
          std::thread t([&] {
            done = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
          });
          std::this_thread::sleep_for(std::chrono::milliseconds(400));
          ncclResult_t r = ncclCommSuspend(comm, NCCL_SUSPEND_MEM);
          t.join();
          RANK_CHECK(r == ncclInvalidUsage && mentions("in flight"), "suspend during a call returned %d: %s", int(r),
                     lastError().c_str());
          RANK_CHECK(done == ncclSuccess, "the call in flight returned %d", done.load());
        }
        RANK_CHECK(buf[0] == 3.f && buf[4095] == 3.f, "sum %g", buf[0]);
        ncclCommDestroy(comm);
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ncclCommGrow: two ranks grow to three, keep their ranks, and the new rank computes with them", "[grow]") {
  char dir[] = "/tmp/gyre-grow-XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string idFile = std::string(dir) + "/id";
  RankOptions o = options(60);
  o.idCount = 2;
  RunResult result = runRanks(
      3,
      [idFile](int rank, int, const ncclUniqueId&) {
        ncclComm_t grown = nullptr;
        if (rank == 2) {
          // The new rank: waits (bounded) for the id rank 0 publishes.
          ncclUniqueId id;
          bool have = false;
          for (int i = 0; i < 1000 && !have; ++i) {
            std::ifstream f(idFile + ".ready", std::ios::binary);
            have = f && f.read(id.internal, sizeof(id.internal)).gcount() == sizeof(id.internal);
            if (!have) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          RANK_CHECK(have, "no id from rank 0 within 10 s");
          RANK_CHECK(ncclCommGrow(nullptr, 3, nullptr, 2, &grown, nullptr) == ncclInvalidArgument, "NULL id accepted");
          RANK_CHECK(ncclCommGrow(nullptr, 3, &id, 5, &grown, nullptr) == ncclInvalidArgument, "rank 5 of 3 accepted");
          RANK_CHECK(ncclCommGrow(nullptr, 3, &id, 2, &grown, nullptr) == ncclSuccess, "grow (new rank): %s",
                     lastError().c_str());
        } else {
          ncclComm_t comm = nullptr;
          if (initHostComm(&comm, rank, 2, rankIds()[1]) != 0) return 1;
          if (checkAllReduce(comm, rank, 2, 61, 3)) return 1;
          ncclUniqueId id{};
          if (rank == 0) {
            RANK_CHECK(ncclCommGetUniqueId(comm, &id) == ncclSuccess, "get id: %s", lastError().c_str());
            ncclUniqueId again;
            RANK_CHECK(ncclCommGetUniqueId(comm, &again) == ncclInvalidUsage && mentions("consumed"),
                       "a second unconsumed id: %s", lastError().c_str());
            std::ofstream(idFile, std::ios::binary).write(id.internal, sizeof(id.internal));
            RANK_CHECK(rename(idFile.c_str(), (idFile + ".ready").c_str()) == 0, "publish the id");
          }
          RANK_CHECK(ncclCommGrow(comm, 3, nullptr, 1, &grown, nullptr) == ncclInvalidArgument, "rank 1 accepted");
          RANK_CHECK(ncclCommGrow(comm, 2, nullptr, -1, &grown, nullptr) == ncclInvalidArgument, "no growth accepted");
          RANK_CHECK(ncclCommGrow(comm, 3, rank == 0 ? &id : nullptr, -1, &grown, nullptr) == ncclSuccess,
                     "grow (rank %d): %s", rank, lastError().c_str());
          if (rank == 0) {
            ncclComm_t unused = nullptr;
            RANK_CHECK(ncclCommGrow(comm, 3, &id, -1, &unused, nullptr) == ncclInvalidArgument && !unused,
                       "a consumed id was accepted");
          }
          // The old communicator still works.
          if (checkAllReduce(comm, rank, 2, 17, 4)) return 1;
          ncclCommDestroy(comm);
        }
        int count = 0, me = -1;
        ncclCommCount(grown, &count);
        ncclCommUserRank(grown, &me);
        RANK_CHECK(count == 3 && me == rank, "grown communicator: rank %d of %d (was %d)", me, count, rank);
        if (checkAllReduce(grown, rank, 3, 257, 5)) return 1;
        ncclCommDestroy(grown);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
  unlink((idFile + ".ready").c_str());
  rmdir(dir);
}

TEST_CASE("per-collective config: each nccl*Config runs as the plain call, algSelection is honoured or refused",
          "[collconfig]") {
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        ncclCollConfig_t config = NCCL_COLLCONFIG_INITIALIZER;
        if (checkAllReduce(comm, rank, n, 0, 6, &config)) return 1;
        if (checkAllReduce(comm, rank, n, 1, 6, &config)) return 1;
        for (const char* sel : {"Ring", "ring", "^Tree", "Ring,Direct"}) {
          config.algSelection = sel;
          if (checkAllReduce(comm, rank, n, 4099, 7, &config)) return 1;
        }
        // Tree runs where the trees were built, else the call is refused by name.
        config.algSelection = "Tree";
        {
          std::vector<int32_t> v(7, rank + 1);
          ncclResult_t r = ncclAllReduceConfig(v.data(), v.data(), 7, ncclInt32, ncclSum, comm, nullptr, &config);
          RANK_CHECK(r == ncclSuccess ? v[6] == 6 : (r == ncclInvalidUsage && mentions("algSelection")),
                     "Tree: %d %s", int(r), lastError().c_str());
        }
        // Reduce has no Direct: refused when forced, the library's choice when not.
        config.algSelection = "Direct";
        std::vector<double> in(97), out(97, -1);
        for (size_t i = 0; i < in.size(); ++i) in[i] = (rank + 1) * 0.5 + double(i);
        RANK_CHECK(ncclReduceConfig(in.data(), out.data(), 97, ncclFloat64, ncclSum, 1, comm, nullptr, &config) ==
                           ncclInvalidUsage && mentions("Direct") && mentions("forceAlgSelection"),
                   "forced Direct Reduce: %s", lastError().c_str());
        config.forceAlgSelection = 0;
        RANK_CHECK(ncclReduceConfig(in.data(), out.data(), 97, ncclFloat64, ncclSum, 1, comm, nullptr, &config) ==
                       ncclSuccess, "unforced Direct Reduce: %s", lastError().c_str());
        if (rank == 1)
          for (size_t i = 0; i < out.size(); ++i)
            RANK_CHECK(out[i] == 3.0 + 3.0 * double(i), "reduce[%zu] = %g", i, out[i]);
        // Every other collective through its Config form.
        config = ncclCollConfig_t NCCL_COLLCONFIG_INITIALIZER;
        config.minCTAs = 1;
        config.maxCTAs = 4;
        config.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
        config.userProfilerTag = 42;
        std::vector<int64_t> b(13, rank == 2 ? 77 : 0);
        RANK_CHECK(ncclBroadcastConfig(b.data(), b.data(), 13, ncclInt64, 2, comm, nullptr, &config) == ncclSuccess &&
                       b[12] == 77, "broadcast: %s", lastError().c_str());
        std::vector<int32_t> mine(5, rank * 10), all(15, -1);
        RANK_CHECK(ncclAllGatherConfig(mine.data(), all.data(), 5, ncclInt32, comm, nullptr, &config) == ncclSuccess,
                   "allgather: %s", lastError().c_str());
        for (int q = 0; q < n; ++q) RANK_CHECK(all[q * 5 + 4] == q * 10, "allgather block %d", q);
        std::vector<int32_t> rsIn(15), rsOut(5, -1);
        for (int i = 0; i < 15; ++i) rsIn[i] = i + rank;
        RANK_CHECK(ncclReduceScatterConfig(rsIn.data(), rsOut.data(), 5, ncclInt32, ncclSum, comm, nullptr, &config) ==
                       ncclSuccess, "reducescatter: %s", lastError().c_str());
        for (int i = 0; i < 5; ++i) RANK_CHECK(rsOut[i] == 3 * (rank * 5 + i) + 3, "reducescatter[%d]=%d", i, rsOut[i]);
        std::vector<int32_t> a2aIn(6), a2aOut(6, -1);
        for (int i = 0; i < 6; ++i) a2aIn[i] = rank * 100 + i;
        RANK_CHECK(ncclAlltoAllConfig(a2aIn.data(), a2aOut.data(), 2, ncclInt32, comm, nullptr, &config) == ncclSuccess,
                   "alltoall: %s", lastError().c_str());
        for (int q = 0; q < n; ++q) RANK_CHECK(a2aOut[q * 2 + 1] == q * 100 + rank * 2 + 1, "alltoall from %d", q);
        std::vector<int32_t> g(15, -1);
        RANK_CHECK(ncclGatherConfig(mine.data(), g.data(), 5, ncclInt32, 0, comm, nullptr, &config) == ncclSuccess,
                   "gather: %s", lastError().c_str());
        if (rank == 0)
          for (int q = 0; q < n; ++q) RANK_CHECK(g[q * 5] == q * 10, "gather block %d", q);
        std::vector<int32_t> sc(15), scOut(5, -1);
        for (int i = 0; i < 15; ++i) sc[i] = 1000 + i;
        RANK_CHECK(ncclScatterConfig(sc.data(), scOut.data(), 5, ncclInt32, 0, comm, nullptr, &config) == ncclSuccess &&
                       scOut[0] == 1000 + rank * 5, "scatter: %s", lastError().c_str());
        // AlltoAll has no algorithm to select: a forced selection is refused.
        config.algSelection = "Ring";
        RANK_CHECK(ncclAlltoAllConfig(a2aIn.data(), a2aOut.data(), 2, ncclInt32, comm, nullptr, &config) ==
                       ncclInvalidUsage && mentions("sends and receives"), "forced alltoall: %s", lastError().c_str());
        // Bad configs are refused naming the field.
        float x = 1;
        ncclCollConfig_t bad = NCCL_COLLCONFIG_INITIALIZER;
        bad.magic = 1;
        RANK_CHECK(ncclAllReduceConfig(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr, &bad) == ncclInvalidArgument &&
                       mentions("config->magic"), "bad magic: %s", lastError().c_str());
        bad = ncclCollConfig_t NCCL_COLLCONFIG_INITIALIZER;
        bad.version = NCCL_VERSION(2, 30, 7);
        RANK_CHECK(ncclAllReduceConfig(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr, &bad) == ncclInvalidArgument &&
                       mentions("config->version"), "old version: %s", lastError().c_str());
        bad = ncclCollConfig_t NCCL_COLLCONFIG_INITIALIZER;
        bad.size = 16;
        RANK_CHECK(ncclAllReduceConfig(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr, &bad) == ncclInvalidArgument &&
                       mentions("config->size"), "size 16: %s", lastError().c_str());
        bad = ncclCollConfig_t NCCL_COLLCONFIG_INITIALIZER;
        bad.algSelection = "Bogus";
        RANK_CHECK(ncclAllReduceConfig(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr, &bad) == ncclInvalidArgument &&
                       mentions("algSelection"), "algSelection Bogus: %s", lastError().c_str());
        bad = ncclCollConfig_t NCCL_COLLCONFIG_INITIALIZER;
        bad.forceAlgSelection = 2;
        RANK_CHECK(ncclAllReduceConfig(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr, &bad) == ncclInvalidArgument &&
                       mentions("forceAlgSelection"), "forceAlgSelection 2: %s", lastError().c_str());
        bad = ncclCollConfig_t NCCL_COLLCONFIG_INITIALIZER;
        bad.minCTAs = 8;
        bad.maxCTAs = 2;
        RANK_CHECK(ncclBroadcastConfig(&x, &x, 1, ncclFloat32, 0, comm, nullptr, &bad) == ncclInvalidArgument &&
                       mentions("minCTAs"), "minCTAs > maxCTAs: %s", lastError().c_str());
        if (checkAllReduce(comm, rank, n, 33, 8)) return 1;
        ncclCommDestroy(comm);
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("windows register collectively (sizes and flags checked across ranks); host-memory communicators refuse "
          "one-sided calls and the device API",
          "[windows]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        void* buf = aligned_alloc(4096, 16384);
        RANK_CHECK(buf, "aligned_alloc");
        ncclWindow_t win = nullptr;
        // Rank 1 registers a symmetric window of another size: both ranks fail, naming rank 1's size.
        size_t size = rank == 0 ? 8192 : 4096;
        RANK_CHECK(ncclCommWindowRegister(comm, buf, size, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclInvalidUsage &&
                       mentions("rank 1") && mentions("4096") && !win,
                   "sizes differ: %s", lastError().c_str());
        RANK_CHECK(ncclCommWindowRegister(comm, buf, 8192, &win, rank == 0 ? NCCL_WIN_DEFAULT
                                                                          : NCCL_WIN_STRICT_ORDERING) ==
                       ncclInvalidUsage && mentions("winFlags"),
                   "flags differ: %s", lastError().c_str());
        RANK_CHECK(ncclCommWindowRegister(comm, buf, 8192, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess && win,
                   "window: %s", lastError().c_str());
        void* user = nullptr;
        RANK_CHECK(ncclWinGetUserPtr(comm, win, &user) == ncclSuccess && user == buf, "user pointer %p", user);
        RANK_CHECK(ncclWinGetUserPtr(comm, win, nullptr) == ncclInvalidArgument, "NULL out accepted");
        RANK_CHECK(ncclWinGetUserPtr(comm, reinterpret_cast<ncclWindow_t>(buf), &user) == ncclInvalidArgument,
                   "a foreign window accepted");
        // One-sided: bad arguments named first, then the refusal (they need a device communicator).
        int peer = 1 - rank;
        RANK_CHECK(ncclPutSignal(buf, 16, ncclFloat32, 5, win, 0, 0, 0, 0, comm, nullptr) == ncclInvalidArgument &&
                       mentions("peer 5"), "peer 5: %s", lastError().c_str());
        RANK_CHECK(ncclPutSignal(buf, 4096, ncclFloat32, peer, win, 0, 0, 0, 0, comm, nullptr) == ncclInvalidArgument &&
                       mentions("overrun"), "overrun: %s", lastError().c_str());
        RANK_CHECK(ncclSignal(peer, 0, 0, 3, comm, nullptr) == ncclInvalidArgument, "flags 3 accepted");
        ncclWaitSignalDesc_t desc = {1, peer, 0, 0};
        RANK_CHECK(ncclWaitSignal(1, nullptr, comm, nullptr) == ncclInvalidArgument, "NULL descs accepted");
        // Device communicators run them (the device_api test); host ones refuse.
        const bool host = !testDeviceComms();
        RANK_CHECK(!host || (ncclPutSignal(buf, 16, ncclFloat32, peer, win, 64, 0, 0, 0, comm, nullptr) ==
                                 ncclInvalidUsage && mentions("one-sided")), "put: %s", lastError().c_str());
        RANK_CHECK(!host || (ncclSignal(peer, 0, 0, 0, comm, nullptr) == ncclInvalidUsage && mentions("one-sided")),
                   "signal");
        RANK_CHECK(!host || (ncclWaitSignal(1, &desc, comm, nullptr) == ncclInvalidUsage && mentions("one-sided")),
                   "wait");
        // Device-side queries: no device API here, said plainly.
        ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
        RANK_CHECK(ncclCommQueryProperties(comm, &props) == ncclSuccess && props.rank == rank && props.nRanks == n &&
                       (!host || !props.deviceApiSupport) && props.ginType == NCCL_GIN_TYPE_NONE,
                   "properties: %s", lastError().c_str());
        ncclCommProperties_t raw{};
        RANK_CHECK(ncclCommQueryProperties(comm, &raw) == ncclInvalidArgument, "uninitialised properties accepted");
        ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
        ncclDevComm dev;
        RANK_CHECK(!host || (ncclDevCommCreate(comm, &reqs, &dev) == ncclInvalidUsage && mentions("host-memory")),
                   "ncclDevCommCreate: %s", lastError().c_str());
        RANK_CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess, "deregister: %s", lastError().c_str());
        RANK_CHECK(ncclCommWindowDeregister(comm, win) == ncclInvalidArgument, "double deregister accepted");
        if (checkAllReduce(comm, rank, n, 45, 9)) return 1;
        ncclCommDestroy(comm);
        free(buf);
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}
