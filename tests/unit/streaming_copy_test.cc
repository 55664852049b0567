// Streaming (non-temporal) copies into a call's output
// (src/host/streaming_copy.h): byte for byte memcpy's result at every
// alignment of source and destination and every length around the 16-byte
// stores and 64-byte rounds, nothing written outside the destination; and
// which calls get them (the lowering's LaneSpec flag against the host
// threshold).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "src/call/call.h"
#include "src/host/streaming_copy.h"
#include "src/lower/lower.h"
#include "src/plan/tuning.h"

using namespace gyre;

namespace {

constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5;

// Copies `n` random bytes from src+srcSkew to dst+dstSkew with copyStreaming
// and checks the destination against the source and its surroundings
// against the guard pattern.
void checkCopy(std::mt19937& rng, size_t n, size_t srcSkew, size_t dstSkew) {
  std::vector<unsigned char> src(n + srcSkew + 1);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  // 64-byte aligned storage so that the skews are the real alignments.
  std::vector<uint64_t> dstWords((2 * kGuard + dstSkew + n + 63) / 8 + 8);
  unsigned char* base = reinterpret_cast<unsigned char*>(dstWords.data());
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  memset(base, kGuardByte, 2 * kGuard + dstSkew + n);
  unsigned char* dst = base + kGuard + dstSkew;
  copyStreaming(dst, src.data() + srcSkew, n);
  INFO("n " << n << ", source skew " << srcSkew << ", destination skew " << dstSkew);
  CHECK(memcmp(dst, src.data() + srcSkew, n) == 0);
  for (size_t i = 0; i < kGuard + dstSkew; ++i) REQUIRE(base[i] == kGuardByte);
  for (size_t i = 0; i < kGuard; ++i) REQUIRE(dst[n + i] == kGuardByte);
}

}  // namespace

TEST_CASE("a streaming copy equals memcpy at every alignment and every length up to five rounds, and writes "
          "nothing outside the destination") {
  std::mt19937 rng(2029);
  for (size_t dstSkew = 0; dstSkew < 16; ++dstSkew)
    for (size_t srcSkew : {size_t{0}, size_t{1}, size_t{8}, size_t{15}})
      for (size_t n = 0; n <= 5 * 64 + 17; ++n) checkCopy(rng, n, srcSkew, dstSkew);
}

TEST_CASE("a streaming copy of a few MiB at odd offsets equals memcpy") {
  std::mt19937 rng(7);
  checkCopy(rng, (3 << 20) + 13, 3, 5);
  checkCopy(rng, 1 << 20, 0, 0);
}

TEST_CASE("calls from the streaming threshold up copy into their output with streaming stores, smaller ones "
          "and calls without a tuning table do not") {
  TuningTable table;
  table.host.streamingStoresMinBytes = 1 << 20;
  Wiring w;
  w.rank = 1;
  w.nranks = 4;
  w.tuning = &table;
  std::vector<float> in(1), out(1);
  auto spec = [&](CollKind coll, size_t count) {
    return baseSpec(w, makeCall(coll, in.data(), out.data(), count, ncclFloat32, ncclSum, 0, false, nullptr));
  };
  // The call's size as nccl-tests counts it: AllGather's gathered output
  // (4 ranks x 64 Ki floats = 1 MiB).
  CHECK(spec(CollKind::AllGather, 64 << 10).streamingStores);
  CHECK_FALSE(spec(CollKind::AllGather, (64 << 10) - 1).streamingStores);
  CHECK(spec(CollKind::AllReduce, 256 << 10).streamingStores);
  CHECK_FALSE(spec(CollKind::AllReduce, (256 << 10) - 1).streamingStores);
  CHECK(spec(CollKind::Broadcast, 1 << 20).streamingStores);
  table.host.streamingStoresMinBytes = kNeverBytes;
  CHECK_FALSE(spec(CollKind::Broadcast, 1 << 20).streamingStores);
  w.tuning = nullptr;
  CHECK_FALSE(spec(CollKind::AllReduce, 1 << 20).streamingStores);
}
