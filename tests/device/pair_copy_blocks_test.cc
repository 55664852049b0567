// The point-to-point kernel (src/kernels/pair_copy_loop.h) as the fake CUDA
// runtime runs it: its shared source on several concurrent blocks of host
// threads, so the grid-stride split, the blocks' arrival count and the
// flags' reset are the device's. Both sides of each pair are launched on
// two streams of one process, as two ranks of one process launch them.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "coll_common.h"
#include "src/device/runtime/runtime.h"
#include "src/kernels/pair_copy_work.h"

namespace {

using namespace gyre::test;
using namespace gyre::test::coll;

RankOptions fakeOptions() {
  RankOptions o;
  o.timeout_s = 60;
  o.env = {{"GYRE_FAKE_CUDA", "1"}, {"GYRE_FAKE_BLOCK_THREADS", "3"}};
  return o;
}

gyre::DeviceRuntime* rt() { return gyre::deviceRuntime(); }

void* deviceBytes(size_t bytes) {
  void* p = nullptr;
  rt()->deviceAlloc(bytes, &p);
  return p;
}

// Byte i of a source: distinct from its neighbours and from the fill.
unsigned char sourceByte(size_t i) { return static_cast<unsigned char>(i * 131 + 7) | 1; }

struct PairRun {
  gyre::PairCopyWork first, second;
  uint32_t* timedOut = nullptr;  // the peer's rank + 1 after a timeout
};

// One launch per side of `sizes.size()` pairs; the second side copies pair
// k from src + srcOffset to dst + dstOffset. Every wait gives up after 10 s.
PairRun pairs(gyre::PairFlags* flags, const std::vector<size_t>& sizes, const std::vector<unsigned char*>& src,
              const std::vector<unsigned char*>& dst) {
  PairRun run;
  run.timedOut = static_cast<uint32_t*>(deviceBytes(sizeof(uint32_t)));
  *run.timedOut = 0;
  for (gyre::PairCopyWork* w : {&run.first, &run.second}) {
    w->timeoutNs = 10'000'000'000ull;
    w->timedOut = run.timedOut;
  }
  for (size_t k = 0; k < sizes.size(); ++k) {
    run.first.pairs[run.first.n++] = gyre::PairCopy{&flags[k], gyre::PairRole::kFirst, 1, nullptr, nullptr, 0};
    run.second.pairs[run.second.n++] =
        gyre::PairCopy{&flags[k], gyre::PairRole::kSecond, 0, src[k], dst[k], sizes[k], &flags[k].arrived};
  }
  return run;
}

void launchBoth(const PairRun& run) {
  cudaStream_t a = nullptr, b = nullptr;
  rt()->streamCreate(&a);
  rt()->streamCreate(&b);
  rt()->launchPairCopies(run.first, a);
  rt()->launchPairCopies(run.second, b);
  rt()->streamSynchronize(a);
  rt()->streamSynchronize(b);
}

}  // namespace

TEST_CASE("the point-to-point kernel's blocks copy sizes that do not divide among them exactly and leave "
          "every flag clear",
          "[device][p2p]") {
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    // Zero, one byte, a vector's neighbours, primes, and one past several
    // blocks' vectors; odd offsets take the byte loop, even ones the vectors.
    const std::vector<size_t> sizes = {0, 1, 15, 16, 17, 97, 4099, 65537, 100003};
    const std::vector<size_t> offsets = {0, 3, 16, 1, 0, 5, 0, 7, 0};
    std::vector<unsigned char*> src, dst;
    for (size_t k = 0; k < sizes.size(); ++k) {
      auto* s = static_cast<unsigned char*>(deviceBytes(sizes[k] + 64));
      auto* d = static_cast<unsigned char*>(deviceBytes(sizes[k] + 64));
      for (size_t i = 0; i < sizes[k] + 64; ++i) s[i] = sourceByte(i);
      std::memset(d, 0, sizes[k] + 64);
      src.push_back(s + offsets[k]);
      dst.push_back(d + offsets[(k + 1) % offsets.size()]);
    }
    auto* flags = static_cast<gyre::PairFlags*>(deviceBytes(sizes.size() * sizeof(gyre::PairFlags)));
    std::memset(flags, 0, sizes.size() * sizeof(gyre::PairFlags));
    const PairRun run = pairs(flags, sizes, src, dst);
    for (int replay = 0; replay < 3; ++replay) {  // cleared flags let the next launch meet afresh
      for (size_t k = 0; k < sizes.size(); ++k) std::memset(dst[k], 0, sizes[k]);
      launchBoth(run);
      RANK_CHECK(*run.timedOut == 0, "launch %d: a wait timed out (peer + 1 = %u)", replay, *run.timedOut);
      for (size_t k = 0; k < sizes.size(); ++k) {
        for (size_t i = 0; i < sizes[k]; ++i)
          RANK_CHECK(dst[k][i] == src[k][i], "launch %d: pair %zu (%zu bytes): byte %zu is %u, not %u", replay, k,
                     sizes[k], i, dst[k][i], src[k][i]);
        RANK_CHECK(dst[k][sizes[k]] == 0, "launch %d: pair %zu wrote past its %zu bytes", replay, k, sizes[k]);
        RANK_CHECK(flags[k].ready == 0 && flags[k].done == 0 && flags[k].arrived == 0,
                   "launch %d: pair %zu left ready %u, done %u, arrived %u", replay, k, flags[k].ready,
                   flags[k].done, flags[k].arrived);
      }
    }
    return 0;
  }, fakeOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}

TEST_CASE("a point-to-point arrival count that is off by one is caught: flags left behind or a wait that times out",
          "[device][p2p]") {
  // Done is raised when the count reaches the number of blocks: a count
  // started one ahead raises it one block early, which a launch of one block
  // could not do (its only arrival would never reach the count, and the first
  // side would time out). The early done clears ready: the last block either
  // got past ready first and leaves its arrival behind, or waits for ready
  // until its timeout. Either way a launch that checks its flags sees it.
  RunResult result = runRanks(1, [](int, int, const ncclUniqueId&) {
    const size_t bytes = 1001;
    auto* s = static_cast<unsigned char*>(deviceBytes(bytes));
    auto* d = static_cast<unsigned char*>(deviceBytes(bytes));
    for (size_t i = 0; i < bytes; ++i) s[i] = sourceByte(i);
    auto* flags = static_cast<gyre::PairFlags*>(deviceBytes(sizeof(gyre::PairFlags)));
    std::memset(flags, 0, sizeof(gyre::PairFlags));
    flags->arrived = 1;  // the miscount
    PairRun run = pairs(flags, {bytes}, {s}, {d});
    // The sides time out apart, the second soon.
    auto* secondTimedOut = static_cast<uint32_t*>(deviceBytes(sizeof(uint32_t)));
    *secondTimedOut = 0;
    run.second.timedOut = secondTimedOut;
    run.second.timeoutNs = 500'000'000ull;
    launchBoth(run);
    RANK_CHECK(*run.timedOut == 0, "the first side timed out waiting for done: the launch ran one block");
    RANK_CHECK(*secondTimedOut != 0 || flags->arrived != 0,
               "a count started at 1 ended clean (arrived %u, no timeout): the miscount went unseen", flags->arrived);
    return 0;
  }, fakeOptions());
  INFO(result.describe());
  CHECK(result.allOk());
}
