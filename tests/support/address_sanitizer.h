// Whether this test is built with AddressSanitizer (GCC defines
// __SANITIZE_ADDRESS__, Clang answers __has_feature), for the few tests
// that measure or rely on glibc's allocator, which the sanitizer replaces.
#pragma once

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define GYRE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GYRE_TEST_ASAN 1
#endif
#endif

#ifdef GYRE_TEST_ASAN
extern "C" {
// The sanitizer runtime's interface (GCC 12 ships no header declaring the first).
size_t __sanitizer_get_current_allocated_bytes();
void __asan_get_shadow_mapping(size_t* shadow_scale, size_t* shadow_offset);
}
#endif
