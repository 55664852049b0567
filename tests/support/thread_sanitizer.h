// Whether this test is built with ThreadSanitizer (GCC defines
// __SANITIZE_THREAD__, Clang answers __has_feature), for the few tests that
// measure the allocator or the address space, both of which the sanitizer
// replaces or fills with its own memory.
#pragma once

#include <stddef.h>

#if defined(__SANITIZE_THREAD__)
#define GYRE_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GYRE_TEST_TSAN 1
#endif
#endif

#ifdef GYRE_TEST_TSAN
extern "C" {
// The sanitizer runtime's interface (GCC 12 ships no header declaring it).
size_t __sanitizer_get_current_allocated_bytes();
}
#endif
