#include "src/transport/ib/unmap_watch.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gyre::ib {
namespace {

constexpr uintptr_t kPage = 4096;
constexpr uint64_t kEvents = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

std::string sysctlValue() {
  int fd = open("/proc/sys/vm/unprivileged_userfaultfd", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "?";
  char buf[16] = {};
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return "?";
  if (buf[n - 1] == '\n') buf[n - 1] = 0;
  return buf;
}

}  // namespace

int openUnmapWatch(std::string* why) {
  // Full mode first: a fault from inside the kernel (a recv() into a
  // discarded page) then waits for the watcher instead of failing with
  // EFAULT. Unprivileged processes get user-mode-only descriptors when
  // vm.unprivileged_userfaultfd is 0 (the events are the same).
  int fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0 && errno == EPERM)
    fd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
  if (fd < 0) {
    *why = std::string("userfaultfd() failed: ") + strerror(errno) +
           " (vm.unprivileged_userfaultfd=" + sysctlValue() + ")";
    return -1;
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kEvents;
  if (ioctl(fd, UFFDIO_API, &api) != 0 || (api.features & kEvents) != kEvents) {
    *why = std::string("userfaultfd gives no unmap events: ") + strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

void populateRange(uintptr_t start, uintptr_t end) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0) return;
#endif
  // Kernels before 5.14: a read maps every page (the zero page where none
  // was), and a later write to it is a copy-on-write fault, not a missing one.
  for (uintptr_t p = start; p < end; p += kPage) (void)*reinterpret_cast<volatile const char*>(p);
}

bool watchRange(int fd, uintptr_t start, uintptr_t end) {
  uffdio_register reg{};
  reg.range.start = start;
  reg.range.len = end - start;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  return ioctl(fd, UFFDIO_REGISTER, &reg) == 0;
}

void unwatchRange(int fd, uintptr_t start, uintptr_t end) {
  // Fails harmlessly where the range is already gone; also wakes a thread
  // faulting in it, which then faults in normally.
  uffdio_range range{start, end - start};
  (void)ioctl(fd, UFFDIO_UNREGISTER, &range);
}

namespace unmap_detail {

bool nextEvent(int fd, uintptr_t* start, uintptr_t* end, bool* failed) {
  for (;;) {
    uffd_msg msg{};
    ssize_t n = read(fd, &msg, sizeof(msg));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *failed = errno != EAGAIN && errno != EWOULDBLOCK;
      return false;
    }
    if (n != static_cast<ssize_t>(sizeof(msg))) {
      *failed = true;
      return false;
    }
    switch (msg.event) {
      case UFFD_EVENT_UNMAP:
      case UFFD_EVENT_REMOVE:
        *start = msg.arg.remove.start;
        *end = msg.arg.remove.end;
        return true;
      case UFFD_EVENT_REMAP:
        // The pages moved away from `from`; the region over it is stale. The
        // watch moved with them to `to`, where nothing of gyre's is.
        unwatchRange(fd, msg.arg.remap.to, msg.arg.remap.to + msg.arg.remap.len);
        *start = msg.arg.remap.from;
        *end = msg.arg.remap.from + msg.arg.remap.len;
        return true;
      case UFFD_EVENT_PAGEFAULT: {
        const uintptr_t page = msg.arg.pagefault.address & ~(kPage - 1);
        *start = page;
        *end = page + kPage;
        return true;
      }
      default:
        continue;  // events not asked for
    }
  }
}

}  // namespace unmap_detail
}  // namespace gyre::ib
