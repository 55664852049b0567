// The NCCL 2.27/2.28 entry points frameworks link against (PyTorch imports
// them from libnccl.so.2): their symbols and pncclX profiling aliases exist,
// and each does what NCCL documents — shrink, revoke, registration, windows,
// group simulation — or refuses clearly (the device-side API).
#include <dlfcn.h>
#include <signal.h>

#include <thread>

#include "coll_common.h"
#include "nccl_device.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

RankOptions options(double timeout = 40) {
  RankOptions o;
  o.timeout_s = timeout;
  o.env = {{"GYRE_TIMEOUT", "5"}, {"GYRE_INIT_TIMEOUT", "10"}};
  return o;
}

// Sum of (r + 1) over the given old ranks, via AllReduce on `comm`.
int checkSum(ncclComm_t comm, int oldRank, const std::vector<int>& members) {
  float x = float(oldRank + 1), want = 0;
  for (int m : members) want += float(m + 1);
  RANK_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "allreduce: %s",
             lastError().c_str());
  RANK_CHECK(x == want, "rank %d: allreduce gave %g, expected %g", oldRank, x, want);
  return 0;
}

}  // namespace

TEST_CASE("the entry points PyTorch imports exist, each with its pncclX alias", "[abi]") {
  const char* names[] = {"ncclCommInitRankScalable", "ncclCommShrink", "ncclCommRevoke", "ncclCommRegister",
                         "ncclCommDeregister", "ncclCommWindowRegister", "ncclCommWindowDeregister",
                         "ncclMemAlloc", "ncclMemFree", "ncclGroupSimulateEnd", "ncclDevCommCreate",
                         "ncclDevCommDestroy", "ncclAllReduce", "ncclCommInitRankConfig", "ncclGetLastError",
                         "ncclCommSplit", "ncclRedOpCreatePreMulSum", "ncclCommFinalize"};
  for (const char* n : names) {
    INFO(n);
    CHECK(dlsym(RTLD_DEFAULT, n) != nullptr);
    CHECK(dlsym(RTLD_DEFAULT, (std::string("p") + n).c_str()) == dlsym(RTLD_DEFAULT, n));
  }
}

TEST_CASE("ncclCommShrink: the ranks that stay form a communicator in their old order", "[abi][shrink]") {
  RunResult result = runRanks(
      4,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        if (checkSum(comm, rank, {0, 1, 2, 3})) return 1;
        if (rank == 2) {  // excluded: does not take part
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
          return 0;
        }
        int excluded[] = {2};
        ncclComm_t small = nullptr;
        RANK_CHECK(ncclCommShrink(comm, excluded, 1, &small, nullptr, NCCL_SHRINK_DEFAULT) == ncclSuccess,
                   "shrink: %s", lastError().c_str());
        int newRank = -1, count = 0;
        ncclCommUserRank(small, &newRank);
        ncclCommCount(small, &count);
        RANK_CHECK(count == 3 && newRank == (rank < 2 ? rank : 2), "rank %d became %d of %d", rank, newRank, count);
        if (checkSum(small, rank, {0, 1, 3})) return 1;
        // A rank may not exclude itself; bad lists are refused.
        ncclComm_t bad = nullptr;
        int self[] = {rank};
        RANK_CHECK(ncclCommShrink(comm, self, 1, &bad, nullptr, 0) == ncclInvalidUsage, "self-exclusion accepted");
        int outOfRange[] = {9};
        RANK_CHECK(ncclCommShrink(comm, outOfRange, 1, &bad, nullptr, 0) == ncclInvalidArgument, "rank 9 accepted");
        RANK_CHECK(ncclCommShrink(comm, excluded, 1, &bad, nullptr, 7) == ncclInvalidArgument, "flags 7 accepted");
        RANK_CHECK(ncclCommDestroy(small) == ncclSuccess, "destroy small");
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("after a rank dies, the survivors revoke and shrink (NCCL_SHRINK_ABORT) and go on", "[abi][shrink]") {
  RankOptions o = options(60);
  o.killRank = 1;
  o.killDelay_s = 0.05;
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        if (checkSum(comm, rank, {0, 1, 2})) return 1;
        rankMark();  // rank 1 is killed now
        if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(30));
        // The next collective fails (rank 1 is gone); the survivors recover.
        std::vector<float> big(1 << 16, 1.f);
        ncclResult_t r = ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat32, ncclSum, comm, nullptr);
        RANK_CHECK(r != ncclSuccess, "a collective with a dead rank succeeded");
        RANK_CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke: %s", lastError().c_str());
        RANK_CHECK(ncclAllReduce(big.data(), big.data(), 1, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess,
                   "a revoked communicator accepted a collective");
        int dead[] = {1};
        ncclComm_t survivors = nullptr;
        RANK_CHECK(ncclCommShrink(comm, dead, 1, &survivors, nullptr, NCCL_SHRINK_ABORT) == ncclSuccess,
                   "shrink: %s", lastError().c_str());
        if (checkSum(survivors, rank, {0, 2})) return 1;
        ncclCommDestroy(survivors);
        ncclCommAbort(comm);
        return 0;
      },
      o);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("registration and windows: handles are checked, leftovers freed at destroy", "[abi][register]") {
  RunResult result = runRanks(
      1,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        alignas(4096) static char buf[8192];
        void* handle = nullptr;
        RANK_CHECK(ncclCommRegister(comm, buf, sizeof buf, &handle) == ncclSuccess && handle, "register");
        RANK_CHECK(ncclCommDeregister(comm, handle) == ncclSuccess, "deregister");
        RANK_CHECK(ncclCommDeregister(comm, handle) == ncclInvalidArgument, "double deregister accepted");
        RANK_CHECK(ncclCommRegister(comm, nullptr, 16, &handle) == ncclInvalidArgument, "NULL buffer accepted");
        ncclWindow_t win = nullptr;
        RANK_CHECK(ncclCommWindowRegister(comm, buf, sizeof buf, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess,
                   "window: %s", lastError().c_str());
        RANK_CHECK(ncclCommWindowRegister(comm, buf + 8, 64, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclInvalidArgument,
                   "misaligned symmetric window accepted");
        RANK_CHECK(ncclCommWindowRegister(comm, buf, 64, &win, 0x40) == ncclInvalidArgument, "bad flags accepted");
        ncclWindow_t kept = nullptr;
        RANK_CHECK(ncclCommWindowRegister(comm, buf, 64, &kept, NCCL_WIN_DEFAULT) == ncclSuccess, "window 2");
        RANK_CHECK(ncclCommRegister(comm, buf, 64, &handle) == ncclSuccess, "register 2");
        // kept and handle stay registered: destroy frees them (valgrind-clean).
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ncclGroupSimulateEnd estimates a group's time and runs nothing", "[abi][simulate]") {
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        std::vector<float> in(1 << 18, 1.f), out(1 << 18, -7.f);
        ncclSimInfo_t small = NCCL_SIM_INFO_INITIALIZER, large = NCCL_SIM_INFO_INITIALIZER;
        ncclGroupStart();
        ncclAllReduce(in.data(), out.data(), 16, ncclFloat32, ncclSum, comm, nullptr);
        RANK_CHECK(ncclGroupSimulateEnd(&small) == ncclSuccess, "simulate: %s", lastError().c_str());
        ncclGroupStart();
        ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr);
        RANK_CHECK(ncclGroupSimulateEnd(&large) == ncclSuccess, "simulate: %s", lastError().c_str());
        RANK_CHECK(small.estimatedTime > 0 && large.estimatedTime > small.estimatedTime,
                   "estimates %g us (64 B) and %g us (1 MiB)", small.estimatedTime, large.estimatedTime);
        RANK_CHECK(out[0] == -7.f, "a simulated call ran");
        RANK_CHECK(ncclGroupEnd() == ncclInvalidUsage, "the simulated group was left open");
        ncclSimInfo_t raw{};
        ncclGroupStart();
        RANK_CHECK(ncclGroupSimulateEnd(&raw) == ncclInvalidArgument, "an uninitialised simInfo was accepted");
        ncclGroupEnd();
        // The communicator still works.
        float x = 1;
        RANK_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess && x == 2, "allreduce");
        ncclCommDestroy(comm);
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("the device-side API and device memory say clearly what they cannot do here", "[abi]") {
  RunResult result = runRanks(
      1,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
        ncclDevComm dev;
        // Device communicators make one (the device_api test); host ones refuse.
        if (!testDeviceComms()) {
          RANK_CHECK(ncclDevCommCreate(comm, &reqs, &dev) == ncclInvalidUsage, "ncclDevCommCreate");
          RANK_CHECK(lastError().find("host-memory communicator") != std::string::npos, "text: %s",
                     lastError().c_str());
        }
        void* p = reinterpret_cast<void*>(1);
        ncclResult_t r = ncclMemAlloc(&p, 1 << 20);  // no GPU on the test machines
        if (r == ncclSuccess) {
          ncclMemFree(p);  // a GPU after all
        } else {
          RANK_CHECK(p == nullptr && !lastError().empty(), "failed ncclMemAlloc left %p / no text", p);
        }
        RANK_CHECK(ncclMemFree(nullptr) == ncclSuccess, "ncclMemFree(NULL)");
        ncclCommDestroy(comm);
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ncclCommFinalize: the finished calls stay, a later call is refused naming finalize, destroy follows",
          "[abi][finalize]") {
  RunResult result = runRanks(
      3,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        if (checkSum(comm, rank, {0, 1, 2})) return 1;
        RANK_CHECK(ncclCommFinalize(comm) == ncclSuccess, "finalize: %s", lastError().c_str());
        float x = 1;
        ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr);
        RANK_CHECK(r == ncclInvalidUsage, "allreduce after finalize returned %d", int(r));
        RANK_CHECK(lastError().find("finalized") != std::string::npos, "text: %s", lastError().c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy after finalize: %s", lastError().c_str());
        return 0;
      },
      options());
  INFO(result.describe());
  CHECK(result.allOk());
}
