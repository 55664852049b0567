// Host buffers that peers can map (gyreMemAllocHost, and ncclMemAlloc in a
// process without a GPU): the allocator itself, single-copy Broadcast and
// AllGather that memcpy through the peers' mappings instead of
// process_vm_readv (src/host/peer_mappings.h), ranks that mix such buffers
// with heap ones, and that ncclCommDestroy unmaps every peer's buffer.
#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>

#include "../support/deny_syscalls.h"
#include "../support/log_dir.h"
#include "coll_common.h"

using namespace gyre::test;
using namespace gyre::test::coll;

namespace {

// Whether this kernel lets a process read its parent with process_vm_readv:
// the permission the communicator's single-copy probe needs. Where it is
// refused, single copy is off and no mapping is made (the collectives still
// run, over the FIFOs).
bool crossMemoryAttachWorks() {
  static volatile uint64_t word = 0x6779726531323334ull;
  pid_t parent = getpid();
  pid_t child = fork();
  if (child == 0) {
    uint64_t seen = 0;
    iovec local{&seen, sizeof seen};
    iovec remote{const_cast<uint64_t*>(&word), sizeof seen};
    ssize_t got = process_vm_readv(parent, &local, 1, &remote, 1, 0);
    _exit(got == static_cast<ssize_t>(sizeof seen) && seen == word ? 0 : 1);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Start addresses of this process's mappings of gyre's shareable memory
// ("/memfd:gyre-host-mem" in /proc/self/maps).
std::set<uintptr_t> gyreMemMappings() {
  std::set<uintptr_t> starts;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/memfd:gyre-host-mem") != std::string::npos) starts.insert(std::stoull(line, nullptr, 16));
  return starts;
}

// Mappings of gyre memory that are not one of `own`: the peers' buffers.
size_t peerMappings(const std::set<uintptr_t>& own) {
  size_t n = 0;
  for (uintptr_t start : gyreMemMappings()) n += own.count(start) == 0;
  return n;
}

unsigned char patternByte(int rank, size_t i) { return static_cast<unsigned char>(rank * 37 + i * 11 + (i >> 9)); }

RankOptions singleCopyOptions(const char* mode = "always") {
  RankOptions options;
  options.timeout_s = 30;
  options.env = {{"GYRE_TIMEOUT", "10"}, {"GYRE_INIT_TIMEOUT", "10"}, {"GYRE_SINGLE_COPY", mode},
                 {"NCCL_ALGO", std::nullopt}, {"NCCL_SHM_DISABLE", std::nullopt}};
  return options;
}

// A buffer from gyreMemAllocHost or from the heap.
struct Buffer {
  Buffer(size_t bytes, bool shared) : shared(shared) {
    if (shared) {
      void* p = nullptr;
      if (gyreMemAllocHost(&p, bytes) == ncclSuccess) data = static_cast<unsigned char*>(p);
    } else {
      heap.resize(bytes);
      data = heap.data();
    }
  }
  ~Buffer() {
    if (shared) gyreMemFreeHost(data);
  }
  bool shared;
  std::vector<unsigned char> heap;
  unsigned char* data = nullptr;
};

// An AllGather of each rank's pattern, then a Broadcast of rank 1's in
// place, on buffers of `count` floats (gathered: n times that); 0 when both
// match, else 1 after a RANK_CHECK names the first wrong byte.
int allGatherThenBroadcast(ncclComm_t comm, int rank, int n, size_t count, Buffer& send, Buffer& gathered,
                           Buffer& bcast) {
  const size_t bytes = count * sizeof(float);
  for (size_t i = 0; i < bytes; ++i) send.data[i] = patternByte(rank, i);
  if (rank == 1) memcpy(bcast.data, send.data, bytes);
  rankProgress("allgather");
  RANK_CHECK(ncclAllGather(send.data, gathered.data, count, ncclFloat, comm, nullptr) == ncclSuccess,
             "ncclAllGather: %s", lastError().c_str());
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < bytes; ++i)
      RANK_CHECK(gathered.data[r * bytes + i] == patternByte(r, i), "allgather: byte %zu of rank %d's block", i, r);
  rankProgress("broadcast from rank 1");
  RANK_CHECK(ncclBroadcast(bcast.data, bcast.data, count, ncclFloat, 1, comm, nullptr) == ncclSuccess,
             "ncclBroadcast: %s", lastError().c_str());
  for (size_t i = 0; i < bytes; ++i) RANK_CHECK(bcast.data[i] == patternByte(1, i), "broadcast: byte %zu", i);
  return 0;
}

}  // namespace

TEST_CASE("ncclMemAlloc without a GPU and gyreMemAllocHost return zeroed page-aligned host memory that the frees "
          "release, and a free of a pointer they did not make names it",
          "[sharedbuffers]") {
  RankOptions options;
  options.idMode = IdMode::kNone;
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        void* p = nullptr;
        RANK_CHECK(ncclMemAlloc(&p, 10000) == ncclSuccess && p, "ncclMemAlloc: %s", lastError().c_str());
        RANK_CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0, "ncclMemAlloc gave %p, not page-aligned", p);
        auto* bytes = static_cast<unsigned char*>(p);
        for (size_t i = 0; i < 10000; ++i) RANK_CHECK(bytes[i] == 0, "byte %zu of a new allocation is %d", i, bytes[i]);
        memset(p, 0x7f, 10000);
        RANK_CHECK(gyreMemMappings().count(reinterpret_cast<uintptr_t>(p)) == 1, "no memfd mapping at %p", p);
        RANK_CHECK(ncclMemFree(p) == ncclSuccess, "ncclMemFree: %s", lastError().c_str());
        RANK_CHECK(gyreMemMappings().count(reinterpret_cast<uintptr_t>(p)) == 0, "%p is still mapped after free", p);

        void* q = nullptr;
        RANK_CHECK(gyreMemAllocHost(&q, 1) == ncclSuccess && q, "gyreMemAllocHost: %s", lastError().c_str());
        RANK_CHECK(gyreMemFreeHost(q) == ncclSuccess, "gyreMemFreeHost: %s", lastError().c_str());
        void* none = reinterpret_cast<void*>(1);
        RANK_CHECK(gyreMemAllocHost(&none, 0) == ncclSuccess && none == nullptr, "size 0 must give NULL");
        RANK_CHECK(gyreMemAllocHost(nullptr, 8) == ncclInvalidArgument, "a NULL ptr must be refused");
        RANK_CHECK(containsNoCase(lastError(), "ptr is NULL"), "error: %s", lastError().c_str());

        int onStack = 0;
        RANK_CHECK(gyreMemFreeHost(&onStack) == ncclInvalidArgument, "freeing a stack address must fail");
        RANK_CHECK(containsNoCase(lastError(), "not the start of a gyreMemAllocHost allocation"), "error: %s",
                   lastError().c_str());
        RANK_CHECK(gyreMemFreeHost(nullptr) == ncclSuccess, "freeing NULL is a no-op");
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a child forked from a process with a live communicator and gyreMemAllocHost memory reads a private copy "
          "of it, whose writes stay the child's, and may free it",
          "[sharedbuffers]") {
  RankOptions options;
  options.idMode = IdMode::kNone;
  RunResult result = runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclUniqueId id;
        RANK_CHECK(ncclGetUniqueId(&id) == ncclSuccess, "ncclGetUniqueId: %s", lastError().c_str());
        ncclComm_t comm = nullptr;  // live across the fork: the child is a forked child to gyre
        RANK_CHECK(gyreCommInitRankHost(&comm, 1, id, 0, nullptr) == ncclSuccess, "init: %s", lastError().c_str());
        const size_t bytes = 3 * 4096 + 5;
        void* p = nullptr;
        RANK_CHECK(gyreMemAllocHost(&p, bytes) == ncclSuccess && p, "gyreMemAllocHost: %s", lastError().c_str());
        memset(p, 0x11, bytes);
        pid_t pid = fork();
        if (pid == 0) {
          auto* b = static_cast<unsigned char*>(p);
          int code = 0;
          for (size_t i = 0; i < bytes; ++i)
            if (b[i] != 0x11) code |= 1;  // did not inherit the contents
          memset(p, 0x22, bytes);
          if (gyreMemFreeHost(p) != ncclSuccess) code |= 2;
          if (gyreMemMappings().count(reinterpret_cast<uintptr_t>(p)) != 0) code |= 4;  // still mapped
          _exit(code);
        }
        int status = 0;
        RANK_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/waitpid failed: %s", strerror(errno));
        RANK_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                   "the child failed (status %#x: 1 contents, 2 free, 4 still mapped)", status);
        auto* b = static_cast<unsigned char*>(p);
        for (size_t i = 0; i < bytes; ++i) RANK_CHECK(b[i] == 0x11, "the child's write reached byte %zu", i);
        RANK_CHECK(gyreMemFreeHost(p) == ncclSuccess, "gyreMemFreeHost: %s", lastError().c_str());
        RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
        return 0;
      },
      options);
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("single-copy allgather and broadcast over 2 and 3 ranks on gyreMemAllocHost buffers read through the "
          "peers' mappings, match the inputs, and ncclCommDestroy unmaps every peer's buffer",
          "[sharedbuffers][singlecopy]") {
  const bool attach = crossMemoryAttachWorks();
  INFO("process_vm_readv allowed: " << attach);
  for (int nranks : {2, 3}) {
    INFO(nranks << " ranks");
    RunResult result = runRanks(
        nranks,
        [attach](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s",
                     lastError().c_str());
          // A prime count of floats, so the pieces do not divide evenly.
          const size_t count = 100003, bytes = count * sizeof(float);
          Buffer send(bytes, true), gathered(bytes * n, true), bcast(bytes, true);
          RANK_CHECK(send.data && gathered.data && bcast.data, "gyreMemAllocHost: %s", lastError().c_str());
          const std::set<uintptr_t> own = gyreMemMappings();
          if (allGatherThenBroadcast(comm, rank, n, count, send, gathered, bcast) != 0) return 1;

          // AllGather reads every peer's input: n - 1 mappings at least.
          const size_t mapped = peerMappings(own);
          if (attach) RANK_CHECK(mapped >= static_cast<size_t>(n - 1), "%zu peer mappings, want >= %d", mapped, n - 1);
          else RANK_CHECK(mapped == 0, "%zu peer mappings although single copy is off", mapped);
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          RANK_CHECK(peerMappings(own) == 0, "%zu peer mappings left after ncclCommDestroy", peerMappings(own));
          return 0;
        },
        singleCopyOptions());
    INFO(result.describe());
    CHECK(result.allOk());
  }
}

TEST_CASE("single-copy broadcast and allgather over 2 ranks where only one rank's buffers are shareable match the "
          "inputs both ways round, by reference at every size and by value where the planner says",
          "[sharedbuffers][singlecopy]") {
  const std::pair<int, const char*> runs[] = {{0, "always"}, {1, "always"}, {0, "auto"}, {1, "auto"}};
  for (const auto& [sharedRank, mode] : runs) {
    INFO("rank " << sharedRank << " has gyreMemAllocHost buffers, GYRE_SINGLE_COPY=" << mode);
    RunResult result = runRanks(
        2,
        [sharedRank](int rank, int n, const ncclUniqueId& id) {
          ncclComm_t comm = nullptr;
          RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s",
                     lastError().c_str());
          const bool shared = rank == sharedRank;
          // 2 ranks split each broadcast piece: the root writes a third into
          // the reader's output, through the mapping where the reader's is shareable.
          for (size_t count : {size_t(1), size_t(7), size_t(65537), size_t(300007)}) {
            const size_t bytes = count * sizeof(int32_t);
            Buffer buf(bytes, shared), send(bytes, shared), gathered(2 * bytes, shared);
            for (size_t i = 0; i < bytes; ++i) send.data[i] = patternByte(rank, i);
            for (int root : {0, 1}) {
              if (rank == root) memcpy(buf.data, send.data, bytes);
              else memset(buf.data, 0, bytes);
              RANK_CHECK(ncclBroadcast(buf.data, buf.data, count, ncclInt32, root, comm, nullptr) == ncclSuccess,
                         "ncclBroadcast: %s", lastError().c_str());
              for (size_t i = 0; i < bytes; ++i)
                RANK_CHECK(buf.data[i] == patternByte(root, i), "broadcast of %zu from %d: byte %zu", count, root, i);
            }
            RANK_CHECK(ncclAllGather(send.data, gathered.data, count, ncclInt32, comm, nullptr) == ncclSuccess,
                       "ncclAllGather: %s", lastError().c_str());
            for (int r = 0; r < n; ++r)
              for (size_t i = 0; i < bytes; ++i)
                RANK_CHECK(gathered.data[r * bytes + i] == patternByte(r, i), "allgather of %zu: rank %d byte %zu",
                           count, r, i);
          }
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        singleCopyOptions(mode));
    INFO(result.describe());
    CHECK(result.allOk());
  }
}

// The "a kernel that forbids cross-memory attach": the probe at init
// finds process_vm_readv refused, rank 0 says why in one INFO line, and
// GYRE_SINGLE_COPY=always then runs the two-copy schedules (a read by
// reference would fail the call with EPERM instead).
TEST_CASE("where the kernel refuses process_vm_readv (seccomp), single copy falls back to two copies, says why "
          "once, and broadcast and allgather of heap buffers match the inputs",
          "[sharedbuffers][singlecopy]") {
  for (int nranks : {2, 3}) {
    INFO(nranks << " ranks");
    LogDir logs;
    REQUIRE(logs.ok());
    RankOptions options = singleCopyOptions("always");
    options.env.push_back({"NCCL_DEBUG", "INFO"});
    options.env.push_back({"NCCL_DEBUG_SUBSYS", "INIT"});
    options.env.push_back({"NCCL_DEBUG_FILE", logs.pattern()});
    RunResult result = runRanks(
        nranks,
        [](int rank, int n, const ncclUniqueId& id) {
          // As ptrace_scope 3 or a container's seccomp profile would.
          RANK_CHECK(denySyscalls({SYS_process_vm_readv, SYS_process_vm_writev}, EPERM), "seccomp: %s",
                     strerror(errno));
          ncclComm_t comm = nullptr;
          RANK_CHECK(gyreCommInitRankHost(&comm, n, id, rank, nullptr) == ncclSuccess, "init: %s",
                     lastError().c_str());
          // Heap buffers, a prime count spanning several pieces.
          const size_t count = 300007, bytes = count * sizeof(float);
          Buffer send(bytes, false), gathered(bytes * n, false), bcast(bytes, false);
          if (allGatherThenBroadcast(comm, rank, n, count, send, gathered, bcast) != 0) return 1;
          RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy: %s", lastError().c_str());
          return 0;
        },
        options);
    INFO(result.describe());
    CHECK(result.allOk());
    INFO("the ranks' log:\n" << logs.allText());
    const std::string why =
        "single-copy transfers off: process_vm_readv by rank 0 from rank 1 failed: " + std::string(strerror(EPERM));
    CHECK(logs.linesWith({why}).size() == 1);  // once, by rank 0
    CHECK(logs.linesWith({"single-copy transfers on"}).empty());
  }
}
