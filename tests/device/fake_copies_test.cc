// The fake CUDA runtime's copies (tests/support/fake_cuda/copy_engine.h)
// read device memory a word at a time, as a GPU's copy engine does, while
// other streams write flag words in it: gyre's watchdogs sample inbox flags
// with such copies (src/device/device_words.h). ThreadSanitizer reports a
// race here if a copy reads those words non-atomically (a plain memmove).
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <vector>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"
#include "tests/support/fake_cuda/fake_cuda.h"

namespace {

cudaStream_t stream(uintptr_t n) { return reinterpret_cast<cudaStream_t>(n); }

}  // namespace

TEST_CASE("copies on one stream read a flag word that another stream's memory operations count up, each read a "
          "value written and never one older than the read before",
          "[device][fake]") {
  gyre::DeviceRuntime* rt = gyre::deviceRuntime();
  REQUIRE(rt != nullptr);
  constexpr uint32_t kWrites = 200;
  constexpr size_t kReads = 200;
  // Three words, the flag in the middle: reads of the flag alone, and reads
  // of all three (8 bytes at once, then one word, on the fake).
  void* words = nullptr;
  REQUIRE(rt->deviceAlloc(3 * sizeof(uint32_t), &words) == ncclSuccess);
  REQUIRE(rt->memsetSync(words, 0, 3 * sizeof(uint32_t)) == ncclSuccess);
  auto* flag = static_cast<uint32_t*>(words) + 1;
  std::vector<std::array<uint32_t, 3>> seen(kReads, {0xffffffffu, 0xffffffffu, 0xffffffffu});
  const cudaStream_t writer = stream(11), reader = stream(12);
  for (uint32_t v = 1; v <= kWrites; ++v) REQUIRE(rt->streamWriteFlag(writer, flag, v) == ncclSuccess);
  for (size_t i = 0; i < kReads; ++i) {
    const size_t row = sizeof(seen[i]);
    if (i % 2 == 0) REQUIRE(rt->copyAsync(&seen[i][1], flag, sizeof(uint32_t), reader) == ncclSuccess);
    else REQUIRE(rt->copy2DAsync(seen[i].data(), row, words, row, row, 1, reader) == ncclSuccess);
  }
  REQUIRE(rt->streamSynchronize(reader) == ncclSuccess);
  REQUIRE(rt->streamSynchronize(writer) == ncclSuccess);
  uint32_t last = 0;
  for (size_t i = 0; i < kReads; ++i) {
    INFO("read " << i);
    const uint32_t v = seen[i][1];
    REQUIRE(v <= kWrites);
    REQUIRE(v >= last);
    last = v;
    if (i % 2 == 1) {
      CHECK(seen[i][0] == 0);
      CHECK(seen[i][2] == 0);
    }
  }
  // Once both streams are done a copy reads the last value.
  uint32_t final = 0;
  REQUIRE(rt->copySync(&final, flag, sizeof(final)) == ncclSuccess);
  CHECK(final == kWrites);
  REQUIRE(rt->deviceFree(words) == ncclSuccess);
}
