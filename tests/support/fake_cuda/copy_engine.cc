#include "tests/support/fake_cuda/copy_engine.h"

#include <cstdint>
#include <cstring>

namespace gyre {
namespace {

// One aligned word (or two) of the source, read whole, and written as whole
// words where the destination is aligned to hold them.
template <typename Word>
void moveWord(unsigned char* d, const unsigned char* s) {
  const Word w = __atomic_load_n(reinterpret_cast<const Word*>(s), __ATOMIC_RELAXED);
  const uintptr_t at = reinterpret_cast<uintptr_t>(d);
  if (at % sizeof(Word) == 0) {
    __atomic_store_n(reinterpret_cast<Word*>(d), w, __ATOMIC_RELAXED);
  } else if (at % 4 == 0) {
    uint32_t halves[sizeof(Word) / 4];
    memcpy(halves, &w, sizeof(w));
    for (size_t k = 0; k < sizeof(Word) / 4; ++k)
      __atomic_store_n(reinterpret_cast<uint32_t*>(d) + k, halves[k], __ATOMIC_RELAXED);
  } else {
    memcpy(d, &w, sizeof(w));
  }
}

}  // namespace

void copyEngineCopy(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  if (bytes == 0) return;
  if (d < s + bytes && s < d + bytes) {
    memmove(dst, src, bytes);
    return;
  }
  size_t i = 0;
  for (; i < bytes && reinterpret_cast<uintptr_t>(s + i) % 4 != 0; ++i) d[i] = s[i];
  // 8 bytes at a time where the source allows: two words read at once, each still whole.
  if (i + 4 <= bytes && reinterpret_cast<uintptr_t>(s + i) % 8 != 0) {
    moveWord<uint32_t>(d + i, s + i);
    i += 4;
  }
  for (; i + 8 <= bytes; i += 8) moveWord<uint64_t>(d + i, s + i);
  if (i + 4 <= bytes) {
    moveWord<uint32_t>(d + i, s + i);
    i += 4;
  }
  for (; i < bytes; ++i) d[i] = s[i];
}

}  // namespace gyre
