#include "src/host/streaming_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace gyre {

void copyStreaming(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  // Streaming stores need 16-byte aligned destinations (SSE2, which every
  // x86-64 CPU has); the unaligned head and the tail go by memcpy.
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head > bytes) head = bytes;
  if (head) memcpy(d, s, head);
  size_t i = head;
  // A whole cache line per round: the CPU's write-combining buffer then
  // goes to memory a full line at a time.
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
  if (i < bytes) memcpy(d + i, s + i, bytes - i);
  // Streaming stores are weakly ordered, even against later plain stores:
  // without the fence a peer could see the step published before the bytes.
  _mm_sfence();
#else
  memcpy(dst, src, bytes);
#endif
}

}  // namespace gyre
