// A send over shared memory is complete once its steps sit in the peer's
// mapping: the sending rank returns without waiting for the receiver to read
// them, and the receiver still gets every byte even if the sender has
// destroyed its communicator and exited by then.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "../support/fork_ranks.h"
#include "shm_test_util.h"

namespace {

using namespace gyre::test;

constexpr int kReceiverDelayMs = 500;

int32_t value(size_t i) { return static_cast<int32_t>(i * 2654435761u + 17u); }

void checkRootReturnsFirst(size_t count, const char* singleCopy) {
  RankOptions options;
  options.timeout_s = 60;
  // By reference (process_vm_readv, the default from 1 MiB on Intel CPUs) a
  // root waits for its reader by design: these cases are about the paths
  // that need not, so that one is ruled out whatever the CPU.
  options.env = {{"GYRE_TIMEOUT", "20"}, {"GYRE_INIT_TIMEOUT", "20"}, {"NCCL_SHM_DISABLE", std::nullopt},
                 {"GYRE_SINGLE_COPY", singleCopy}, {"GYRE_SINGLE_COPY_REFERENCE_MIN_BYTES", "never"}};
  RunResult result = runRanks(
      2,
      [count](int rank, int n, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        ncclResult_t r = gyreCommInitRankHost(&comm, n, id, rank, nullptr);
        RANK_CHECK(r == ncclSuccess, "init returned %d: %s", int(r), lastError().c_str());
        RANK_CHECK(countShmMappings() > 0, "rank %d does not use shared memory", rank);
        std::vector<int32_t> buf(count, -1);
        if (rank == 0) {
          for (size_t i = 0; i < count; ++i) buf[i] = value(i);
          auto start = std::chrono::steady_clock::now();
          r = ncclBroadcast(buf.data(), buf.data(), count, ncclInt32, 0, comm, nullptr);
          double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
          RANK_CHECK(r == ncclSuccess, "broadcast returned %d: %s", int(r), lastError().c_str());
          // Rank 1 starts reading only after kReceiverDelayMs.
          RANK_CHECK(ms < kReceiverDelayMs / 2, "the root waited %.0f ms for its peer to read", ms);
          for (size_t i = 0; i < count; ++i) buf[i] = 0;  // the call no longer reads the buffer
          r = ncclCommDestroy(comm);
          RANK_CHECK(r == ncclSuccess, "destroy returned %d", int(r));
          return 0;  // exits, closing its end, before rank 1 reads
        }
        usleep(kReceiverDelayMs * 1000);
        r = ncclBroadcast(buf.data(), buf.data(), count, ncclInt32, 0, comm, nullptr);
        RANK_CHECK(r == ncclSuccess, "broadcast from a root that has exited returned %d: %s", int(r),
                   lastError().c_str());
        for (size_t i = 0; i < count; ++i)
          RANK_CHECK(buf[i] == value(i), "element %zu is %d, expected %d", i, buf[i], value(i));
        r = ncclCommDestroy(comm);
        RANK_CHECK(r == ncclSuccess, "destroy returned %d", int(r));
        return 0;
      },
      options);
  INFO(result.describe());
  REQUIRE(result.allOk());
}

}  // namespace

// 64 KiB of int32 fit the FIFO, so the root never waits for a free slot. The
// two-copy FIFO path: single copy by reference (GYRE_SINGLE_COPY=always)
// makes a root wait for its reader's acknowledgement, as the reader copies
// straight from the root's buffer.
TEST_CASE("a broadcast root over shared memory returns before its peer reads, and the peer still gets the data "
          "after the root exited", "[shm]") {
  checkRootReturnsFirst(16384, "off");
}

// The planner's default from 8 KiB is single copy by value (on Intel CPUs up
// to 1 MiB; by reference is ruled out above): a heap buffer's elements go
// through the FIFO, so no acknowledgement is awaited (16 KiB, and 1 MiB,
// which still fits the FIFO's 8 slots).
TEST_CASE("a broadcast root with a heap buffer returns before its peer reads under single copy by value", "[shm]") {
  checkRootReturnsFirst(4096, "auto");
  checkRootReturnsFirst(262144, "auto");
}
