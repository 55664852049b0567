// NCCL_CHECKS_DISABLE and NCCL_CHECK_POINTERS: what argument checking each
// setting turns off or on, on a one-rank communicator.
#include "coll_common.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

RunResult runOneRank(std::vector<std::pair<std::string, std::optional<std::string>>> env,
                     const std::function<int(ncclComm_t)>& fn) {
  RankOptions o;
  o.timeout_s = 30;
  o.env = std::move(env);
  return runRanks(
      1,
      [&](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (initHostComm(&comm, rank, n, id) != 0) return 1;
        int rc = fn(comm);
        ncclCommDestroy(comm);
        return rc;
      },
      o);
}

// A float buffer one byte off its alignment, and one overlapping it.
int misalignedAndOverlapping(ncclComm_t comm, bool expectRefused) {
  alignas(16) char raw[64] = {};
  float* odd = reinterpret_cast<float*>(raw + 1);
  ncclResult_t r = ncclAllReduce(odd, odd, 4, ncclFloat32, ncclSum, comm, nullptr);
  RANK_CHECK((r != ncclSuccess) == expectRefused, "misaligned buffer: returned %d", int(r));
  float* a = reinterpret_cast<float*>(raw);
  r = ncclAllReduce(a, a + 2, 4, ncclFloat32, ncclSum, comm, nullptr);
  RANK_CHECK((r != ncclSuccess) == expectRefused, "overlapping buffers: returned %d", int(r));
  // NULL is refused whatever the setting: it would crash.
  r = ncclAllReduce(nullptr, a, 4, ncclFloat32, ncclSum, comm, nullptr);
  RANK_CHECK(r == ncclInvalidArgument, "NULL sendbuff: returned %d", int(r));
  return 0;
}

}  // namespace

TEST_CASE("by default misaligned and overlapping buffers are refused", "[checks]") {
  RunResult result = runOneRank({{"NCCL_CHECKS_DISABLE", std::nullopt}},
                                [](ncclComm_t comm) { return misalignedAndOverlapping(comm, true); });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("NCCL_CHECKS_DISABLE=1 skips the alignment and overlap checks but not the NULL check", "[checks]") {
  RunResult result = runOneRank({{"NCCL_CHECKS_DISABLE", "1"}},
                                [](ncclComm_t comm) { return misalignedAndOverlapping(comm, false); });
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("NCCL_CHECK_POINTERS=1 leaves host communicators' host buffers alone", "[checks]") {
  RunResult result = runOneRank({{"NCCL_CHECK_POINTERS", "1"}}, [](ncclComm_t comm) {
    float x = 1;
    RANK_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "%s",
               lastError().c_str());
    return 0;
  });
  INFO(result.describe());
  CHECK(result.allOk());
}
