// Resource accounting: after ncclCommDestroy or ncclCommAbort a process has exactly
// the open fds and threads it had before init (after a settle of at most 1 s for
// threads to exit). Counted from /proc/self/fd and /proc/self/task in each child.
// Memory: from the second cycle on, neither the heap in use (glibc's mallinfo2)
// nor the number of mappings (/proc/self/maps: shm segments, stacks) grows; the
// first cycle may leave what a process keeps once (malloc arenas of threads,
// per-thread schedule caches). Under AddressSanitizer malloc is the sanitizer's
// (mallinfo2 reads 0), so the heap is its count of bytes in use, and its own
// memory (shadow, allocator regions) is not counted as mappings. Under
// ThreadSanitizer the heap is likewise its count, and only mappings of files
// (shared-memory segments, memfds, libraries) are counted: the sanitizer maps
// anonymous memory for every thread and never unmaps it, while the threads
// themselves are counted above, so a leaked segment still shows.
#include <catch2/catch.hpp>
#include <malloc.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "../support/address_sanitizer.h"
#include "../support/fork_ranks.h"
#include "../support/thread_sanitizer.h"

namespace {

using namespace gyre::test;

enum class Teardown { kDestroy, kAbort };

struct MemoryUse {
  size_t heapBytes = 0;  // allocated from malloc, including its mmap'd chunks
  int mappings = 0;
};

#ifdef GYRE_TEST_ASAN
// Whether [lo, hi) is AddressSanitizer's own memory: its shadow of the whole
// address space, or the region its allocator reserves for small and medium
// chunks (0x600000000000 + 4 TiB on x86-64 Linux). Both grow and split as the
// program allocates, without any of it being the program's mapping.
bool sanitizerMemory(uintptr_t lo, uintptr_t hi) {
  size_t scale = 0, offset = 0;
  __asan_get_shadow_mapping(&scale, &offset);
  const uintptr_t shadowEnd = (uintptr_t{0x7fffffffffff} >> scale) + offset;
  const uintptr_t allocatorBegin = 0x600000000000, allocatorEnd = allocatorBegin + (uintptr_t{1} << 42);
  return (lo >= offset && hi <= shadowEnd + 1) || (lo >= allocatorBegin && hi <= allocatorEnd);
}
#endif

MemoryUse memoryUse() {
  MemoryUse u;
#if defined(GYRE_TEST_ASAN) || defined(GYRE_TEST_TSAN)
  u.heapBytes = __sanitizer_get_current_allocated_bytes();
#else
  struct mallinfo2 m = mallinfo2();
  u.heapBytes = m.uordblks + m.hblkhd;
#endif
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
#ifdef GYRE_TEST_ASAN
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 && sanitizerMemory(lo, hi)) continue;
#endif
#ifdef GYRE_TEST_TSAN
    // The sixth field, the path, is empty for anonymous memory.
    if (line.find('/') == std::string::npos) continue;
#endif
    ++u.mappings;
  }
  return u;
}

// Heap growth allowed over the cycles after the first: allocator noise, not a
// leak of a communicator (whose FIFOs and schedules alone are megabytes).
constexpr size_t kHeapSlackBytes = 4 << 10;

// Each rank runs `cycles` init / allreduce / teardown rounds (round k uses id k) and
// checks the fd and thread counts against the ones from before the first init.
void expectNoLeaks(int nranks, IdMode mode, Teardown how, int cycles) {
  RankOptions options;
  options.idMode = mode;
  options.idCount = cycles;
  options.timeout_s = 40;
  options.env = {{"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}};
  RunResult result = runRanks(
      nranks,
      [how, cycles](int rank, int n, const ncclUniqueId&) {
        const auto fdsBefore = listOpenFds();
        const int fds = countOpenFds(), threads = countThreads();
        const char* verb = how == Teardown::kDestroy ? "ncclCommDestroy" : "ncclCommAbort";
        MemoryUse afterFirst;
        // One buffer for all cycles: the test's own 800 KB would otherwise be
        // a fresh mapping each cycle under AddressSanitizer, whose quarantine
        // keeps the freed one mapped for a while.
        std::vector<double> buf(100000);
        for (int k = 0; k < cycles; ++k) {
          ncclComm_t comm = nullptr;
          rankProgress("cycle " + std::to_string(k));
          ncclResult_t r = gyreCommInitRankHost(&comm, n, rankIds().at(size_t(k)), rank, nullptr);
          RANK_CHECK(r == ncclSuccess, "rank %d cycle %d: init returned %d: %s", rank, k, int(r),
                     lastError().c_str());
          std::fill(buf.begin(), buf.end(), 1.0);
          for (int i = 0; i < 3; ++i) {
            r = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat64, ncclSum, comm, nullptr);
            RANK_CHECK(r == ncclSuccess, "rank %d cycle %d: allreduce returned %d: %s", rank, k,
                       int(r), lastError().c_str());
          }
          r = how == Teardown::kDestroy ? ncclCommDestroy(comm) : ncclCommAbort(comm);
          RANK_CHECK(r == ncclSuccess, "rank %d cycle %d: %s returned %d: %s", rank, k, verb,
                     int(r), lastError().c_str());
          const std::string left = waitForBaseline(fds, threads, fdsBefore);
          RANK_CHECK(left.empty(), "rank %d cycle %d: after %s: %s", rank, k, verb, left.c_str());
          MemoryUse now = memoryUse();
          if (k == 0) afterFirst = now;
          RANK_CHECK(now.heapBytes <= afterFirst.heapBytes + kHeapSlackBytes && now.mappings <= afterFirst.mappings,
                     "rank %d cycle %d: after %s the heap holds %zu bytes in %d mappings; after cycle 0 %zu bytes "
                     "in %d", rank, k, verb, now.heapBytes, now.mappings, afterFirst.heapBytes, afterFirst.mappings);
        }
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

}  // namespace

TEST_CASE("ncclCommDestroy leaves each of 2 ranks with the fds and threads it had before init",
          "[leaks]") {
  expectNoLeaks(2, IdMode::kParent, Teardown::kDestroy, 1);
}

TEST_CASE("ncclCommAbort leaves each of 2 ranks with the fds and threads it had before init",
          "[leaks]") {
  expectNoLeaks(2, IdMode::kParent, Teardown::kAbort, 1);
}

TEST_CASE("the NCCL_COMM_ID rendezvous host releases its listener and threads on destroy",
          "[leaks]") {
  // In this mode rank 0's init hosts the rendezvous, so its listener and any
  // rendezvous thread belong to rank 0's process and must go with the communicator.
  expectNoLeaks(3, IdMode::kEnvCommId, Teardown::kDestroy, 1);
}

TEST_CASE("four init/destroy cycles in one process accumulate no fds, threads, heap or mappings", "[leaks]") {
  expectNoLeaks(3, IdMode::kParent, Teardown::kDestroy, 4);
}

TEST_CASE("four init/abort cycles in one process accumulate no fds, threads, heap or mappings", "[leaks]") {
  expectNoLeaks(2, IdMode::kParent, Teardown::kAbort, 4);
}
