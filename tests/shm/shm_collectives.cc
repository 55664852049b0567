// Collectives over the shared-memory transport give bitwise the results the
// socket transport (NCCL_SHM_DISABLE=1) gives: the transport moves bytes, it
// never changes what is reduced or in which order. Integer sums are also
// checked against the exact value.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "shm_test_util.h"

namespace {

using namespace gyre::test;

const size_t kCounts[] = {1, 7, 1000, 65536 + 3, 262144 + 5};  // up to 1 MiB of floats

std::string hex(uint64_t v) {
  char s[17];
  snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

int32_t intInput(int rank, size_t i) { return static_cast<int32_t>((rank + 1) * 2654435761u + i * 97u); }
float floatInput(int rank, size_t i) { return static_cast<float>((rank * 7919 + i * 104729) % 100003) / 997.0f - 50.0f; }

// Runs allreduces of int32 and float32 sums over every count and records a
// hash of each result. `shm` says which transport the ranks must be using.
RunResult runAllreduces(int nranks, bool shm, const char* buffSize) {
  RankOptions options;
  options.timeout_s = 90;
  options.env = {{"GYRE_TIMEOUT", "30"}, {"GYRE_INIT_TIMEOUT", "30"}};
  options.env.push_back({"NCCL_SHM_DISABLE", shm ? std::nullopt : std::optional<std::string>("1")});
  if (buffSize) options.env.push_back({"NCCL_BUFFSIZE", buffSize});
  return runRanks(
      nranks,
      [shm](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        rankProgress("init");
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "init returned %d: %s", int(r), lastError().c_str());
        const int mappings = countShmMappings();
        RANK_CHECK(shm ? mappings > 0 : mappings == 0, "rank %d maps %d shared-memory segments with %s", rank,
                   mappings, shm ? "shared memory enabled" : "NCCL_SHM_DISABLE=1");
        for (size_t count : kCounts) {
          rankProgress("int32 sum, count " + std::to_string(count));
          std::vector<int32_t> in(count), out(count, -1);
          for (size_t i = 0; i < count; ++i) in[i] = intInput(rank, i);
          r = ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr);
          RANK_CHECK(r == ncclSuccess, "int32 allreduce of %zu returned %d: %s", count, int(r), lastError().c_str());
          for (size_t i = 0; i < count; ++i) {
            uint32_t want = 0;  // exact, wrapping like two's-complement int32 addition
            for (int k = 0; k < n; ++k) want += static_cast<uint32_t>(intInput(k, i));
            RANK_CHECK(static_cast<uint32_t>(out[i]) == want, "int32 sum of %zu: [%zu] is %d, expected %d", count,
                       i, out[i], static_cast<int32_t>(want));
          }
          rankRecord("int32 sum " + std::to_string(count), hex(hashBytes(out.data(), count * 4)));

          rankProgress("float32 sum in place, count " + std::to_string(count));
          std::vector<float> f(count);
          for (size_t i = 0; i < count; ++i) f[i] = floatInput(rank, i);
          r = ncclAllReduce(f.data(), f.data(), count, ncclFloat32, ncclSum, comm, nullptr);
          RANK_CHECK(r == ncclSuccess, "float allreduce of %zu returned %d: %s", count, int(r), lastError().c_str());
          rankRecord("float32 sum " + std::to_string(count), hex(hashBytes(f.data(), count * 4)));
        }
        r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "destroy returned %d", int(r));
        RANK_CHECK(countShmMappings() == 0, "rank %d still maps %d segments after ncclCommDestroy", rank,
                   countShmMappings());
        return 0;
      },
      options);
}

void expectShmMatchesSockets(int nranks, const char* buffSize) {
  RunResult viaShm = runAllreduces(nranks, true, buffSize);
  INFO("shared memory: " << viaShm.describe());
  REQUIRE(viaShm.allOk());
  RunResult viaSockets = runAllreduces(nranks, false, buffSize);
  INFO("sockets: " << viaSockets.describe());
  REQUIRE(viaSockets.allOk());
  CHECK(viaShm.recordMismatches() == "");  // every rank holds the same result
  for (int r = 0; r < nranks; ++r) {
    INFO("rank " << r);
    CHECK(viaShm.ranks[r].records.size() == 2 * std::size(kCounts));
    CHECK(viaShm.ranks[r].records == viaSockets.ranks[r].records);
  }
}

}  // namespace

TEST_CASE("allreduce over shared memory is bitwise the socket transport's result on 2 ranks", "[shm]") {
  expectShmMatchesSockets(2, nullptr);
}

TEST_CASE("allreduce over shared memory is bitwise the socket transport's result on 3 ranks (ring and tree)",
          "[shm]") {
  expectShmMatchesSockets(3, nullptr);
}

TEST_CASE("allreduce over shared memory is bitwise the socket transport's result on 4 ranks", "[shm]") {
  expectShmMatchesSockets(4, nullptr);
}

TEST_CASE("with 1 KiB slots (NCCL_BUFFSIZE=8192) each call wraps the FIFO many times and still matches",
          "[shm]") {
  expectShmMatchesSockets(3, "8192");
}
