// Futex sleeps and wake-ups on FIFO counters in memory that several processes
// map (MAP_SHARED). Never FUTEX_PRIVATE_FLAG: the sleeper and the waker are
// different processes, and the kernel must key the futex on the page, not on
// one address space.
//
// The FIFO counters are 64-bit; a futex word is 32-bit. We sleep on the low
// half: every step changes it, and the 64-bit value cannot move 2^32 steps
// while one sleep slice (at most 50 ms) lasts.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>

namespace gyre {

// The address of the low 32 bits of a 64-bit counter.
inline const uint32_t* futexLowHalf(const uint64_t* counter) {
  const uint32_t* p = reinterpret_cast<const uint32_t*>(counter);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return p + 1;
#else
  return p;
#endif
}

// Wakes every process sleeping on the counter's futex word.
inline void futexWakeAll(const uint64_t* counter) {
  syscall(SYS_futex, futexLowHalf(counter), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Sleeps while the counter's low half equals `expected`, at most timeoutNs.
// Returns at once if it already differs; spurious returns are possible.
inline void futexWait(const uint64_t* counter, uint32_t expected, int64_t timeoutNs) {
  timespec ts{static_cast<time_t>(timeoutNs / 1000000000), static_cast<long>(timeoutNs % 1000000000)};
  syscall(SYS_futex, futexLowHalf(counter), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// One entry of futexWaitAny; the layout of the kernel's struct futex_waitv.
struct FutexWaiter {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
  void set(const uint64_t* counter, uint32_t expected) {
    val = expected;
    uaddr = reinterpret_cast<uintptr_t>(futexLowHalf(counter));
    flags = 2;  // FUTEX_32, and shared: no FUTEX_PRIVATE_FLAG
    reserved = 0;
  }
};
static_assert(sizeof(FutexWaiter) == 24);

// Sleeps until any of the words differs from its expected value or is woken,
// or timeoutNs passes. False when the kernel (before Linux 5.16) or a seccomp
// filter refuses futex_waitv; the caller then falls back to futexWait.
inline bool futexWaitAny(FutexWaiter* waiters, unsigned n, int64_t timeoutNs) {
#ifdef SYS_futex_waitv
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int64_t at = now.tv_sec * 1000000000ll + now.tv_nsec + timeoutNs;
  timespec abs{static_cast<time_t>(at / 1000000000), static_cast<long>(at % 1000000000)};
  long r = syscall(SYS_futex_waitv, waiters, n, 0, &abs, CLOCK_MONOTONIC);
  return r >= 0 || (errno != ENOSYS && errno != EPERM && errno != EINVAL);
#else
  (void)waiters;
  (void)n;
  (void)timeoutNs;
  return false;
#endif
}

}  // namespace gyre
