#include "tests/support/fake_cuda/copy_engine.h"

#include <cstdint>
#include <cstring>

namespace gyre {

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
    const uint32_t w = __atomic_load_n(reinterpret_cast<const uint32_t*>(s + i), __ATOMIC_RELAXED);
    memcpy(d + i, &w, sizeof(w));
    i += 4;
  }
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t w = __atomic_load_n(reinterpret_cast<const uint64_t*>(s + i), __ATOMIC_RELAXED);
    memcpy(d + i, &w, sizeof(w));
  }
  if (i + 4 <= bytes) {
    const uint32_t w = __atomic_load_n(reinterpret_cast<const uint32_t*>(s + i), __ATOMIC_RELAXED);
    memcpy(d + i, &w, sizeof(w));
    i += 4;
  }
  for (; i < bytes; ++i) d[i] = s[i];
}

}  // namespace gyre
