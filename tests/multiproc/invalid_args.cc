// Invalid arguments: each is rejected with ncclInvalidArgument or ncclInvalidUsage,
// ncclGetLastError names the argument, nothing is written, nothing hangs, and the
// communicator keeps working afterwards on every rank.
#include <catch2/catch.hpp>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"

namespace {

using namespace gyre::test;

bool isArgumentError(ncclResult_t r) { return r == ncclInvalidArgument || r == ncclInvalidUsage; }

struct BadCall {
  const char* what;      // the mistake, for the failure message
  const char* argument;  // the word ncclGetLastError must contain
  std::function<ncclResult_t()> call;
};

// Makes each bad call; reports the ones not rejected as documented. Returns the
// number of problems.
int checkRejected(int rank, const std::vector<BadCall>& calls) {
  int problems = 0;
  for (const BadCall& bad : calls) {
    const double t0 = monotonicSeconds();
    ncclResult_t r = bad.call();
    const double elapsed = monotonicSeconds() - t0;
    const std::string msg = lastError();
    if (!isArgumentError(r)) {
      rankFail("rank %d: %s: returned %d (%s), want ncclInvalidArgument or ncclInvalidUsage: \"%s\"",
               rank, bad.what, int(r), ncclGetErrorString(r), msg.c_str());
      ++problems;
    } else if (!containsWord(msg, bad.argument)) {
      rankFail("rank %d: %s: ncclGetLastError does not name \"%s\": \"%s\"", rank, bad.what,
               bad.argument, msg.c_str());
      ++problems;
    }
    if (elapsed > 5) {
      rankFail("rank %d: %s: took %.2f s to be rejected", rank, bad.what, elapsed);
      ++problems;
    }
  }
  return problems;
}

}  // namespace

TEST_CASE("gyreCommInitRankHost rejects a null comm, bad nranks and an out-of-range rank by name",
          "[invalid-args]") {
  RankOptions options;
  options.timeout_s = 30;
  options.idCount = 1;
  options.env = {{"GYRE_INIT_TIMEOUT", "3"}};
  RunResult result = runRanks(
      1,
      [](int rank, int, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        std::vector<BadCall> calls = {
            {"null comm pointer", "comm", [&] { return gyreCommInitRankHost(nullptr, 2, id, 0, nullptr); }},
            {"nranks 0", "nranks", [&] { return gyreCommInitRankHost(&comm, 0, id, 0, nullptr); }},
            {"nranks -1", "nranks", [&] { return gyreCommInitRankHost(&comm, -1, id, 0, nullptr); }},
            {"rank -1 of 2", "rank", [&] { return gyreCommInitRankHost(&comm, 2, id, -1, nullptr); }},
            {"rank 2 of 2", "rank", [&] { return gyreCommInitRankHost(&comm, 2, id, 2, nullptr); }},
            {"rank 5 of 1", "rank", [&] { return gyreCommInitRankHost(&comm, 1, id, 5, nullptr); }},
        };
        checkRejected(rank, calls);
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("ncclAllReduce rejects each invalid argument by name and the 2-rank communicator still works",
          "[invalid-args]") {
  RankOptions options;
  options.timeout_s = 30;
  options.env = {{"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}};
  RunResult result = runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: init returned %d: %s", rank, int(r), lastError().c_str());

        constexpr size_t kCount = 16;
        std::vector<float> send(kCount, float(rank + 1));
        std::vector<unsigned char> recvBytes(kCount * sizeof(float), 0x5A);
        void* recv = recvBytes.data();
        const void* in = send.data();
        const size_t overflow4 = SIZE_MAX / 4 + 1;  // count·4 bytes wraps around
        const size_t overflow8 = SIZE_MAX / 8 + 1;
        cudaStream_t bogusStream = reinterpret_cast<cudaStream_t>(uintptr_t(0x1000));
        std::vector<BadCall> calls = {
            {"null comm", "comm",
             [&] { return ncclAllReduce(in, recv, kCount, ncclFloat32, ncclSum, nullptr, nullptr); }},
            {"null sendbuff", "sendbuff",
             [&] { return ncclAllReduce(nullptr, recv, kCount, ncclFloat32, ncclSum, comm, nullptr); }},
            {"null recvbuff", "recvbuff",
             [&] { return ncclAllReduce(in, nullptr, kCount, ncclFloat32, ncclSum, comm, nullptr); }},
            {"datatype 99", "datatype",
             [&] { return ncclAllReduce(in, recv, kCount, ncclDataType_t(99), ncclSum, comm, nullptr); }},
            {"datatype ncclNumTypes", "datatype",
             [&] { return ncclAllReduce(in, recv, kCount, ncclNumTypes, ncclSum, comm, nullptr); }},
            {"datatype -1", "datatype",
             [&] { return ncclAllReduce(in, recv, kCount, ncclDataType_t(-1), ncclSum, comm, nullptr); }},
            {"op 42", "op",
             [&] { return ncclAllReduce(in, recv, kCount, ncclFloat32, ncclRedOp_t(42), comm, nullptr); }},
            {"op ncclNumOps with no custom op created", "op",
             [&] { return ncclAllReduce(in, recv, kCount, ncclFloat32, ncclNumOps, comm, nullptr); }},
            {"float32 count whose byte size overflows", "count",
             [&] { return ncclAllReduce(in, recv, overflow4, ncclFloat32, ncclSum, comm, nullptr); }},
            {"float64 count whose byte size overflows", "count",
             [&] { return ncclAllReduce(in, recv, overflow8, ncclFloat64, ncclSum, comm, nullptr); }},
            {"non-NULL stream on a host communicator", "stream",
             [&] { return ncclAllReduce(in, recv, kCount, ncclFloat32, ncclSum, comm, bogusStream); }},
        };
        checkRejected(rank, calls);
        for (unsigned char b : recvBytes)
          RANK_CHECK(b == 0x5A, "rank %d: a rejected call wrote into recvbuff", rank);

        ncclResult_t async = ncclInternalError;
        r = ncclCommGetAsyncError(comm, &async);
        RANK_CHECK(r == ncclSuccess && async == ncclSuccess,
                   "rank %d: after rejected calls ncclCommGetAsyncError gave %d / %d", rank, int(r),
                   int(async));
        std::vector<float> out(kCount, -1.0f);
        r = ncclAllReduce(in, out.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
        RANK_CHECK(r == ncclSuccess, "rank %d: a valid allreduce after the rejected ones returned %d: %s",
                   rank, int(r), lastError().c_str());
        for (size_t i = 0; i < kCount; ++i)
          RANK_CHECK(out[i] == 3.0f, "rank %d: element %zu is %g, want 1 + 2 = 3", rank, i, double(out[i]));
        r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "rank %d: destroy returned %d: %s", rank, int(r), lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}
