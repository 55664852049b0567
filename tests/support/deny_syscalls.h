// deny_syscalls.h — makes chosen system calls fail with an errno in the
// calling process (a seccomp filter), as a container's profile or a
// hardened kernel would, so a test can check gyre's fallback where this
// machine allows the call. Irreversible: call it in a forked child.
#ifndef GYRE_TESTS_SUPPORT_DENY_SYSCALLS_H_
#define GYRE_TESTS_SUPPORT_DENY_SYSCALLS_H_

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

#include <initializer_list>
#include <vector>

namespace gyre::test {

// Every call in `numbers` (SYS_...) returns -1 with errno `error` from now
// on; the rest run as before (at most 255 calls: a jump holds a byte).
// False when the kernel refused the filter.
inline bool denySyscalls(std::initializer_list<int> numbers, int error) {
  const unsigned n = static_cast<unsigned>(numbers.size());
  std::vector<sock_filter> filter;
  filter.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  unsigned i = 0;
  // A match jumps past the remaining tests and the allow to the deny.
  for (int nr : numbers) {
    const auto toDeny = static_cast<unsigned char>(n - i++);
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(nr), toDeny, 0));
  }
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(error) & SECCOMP_RET_DATA)));
  sock_fprog prog{static_cast<unsigned short>(filter.size()), filter.data()};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

}  // namespace gyre::test

#endif  // GYRE_TESTS_SUPPORT_DENY_SYSCALLS_H_
