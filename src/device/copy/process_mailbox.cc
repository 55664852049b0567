#include "src/device/copy/process_mailbox.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "src/bootstrap/bootstrap.h"
#include "src/debug/error.h"

namespace gyre {
namespace {

// What each rank tells the others at set-up: where its host's segment is.
struct MailboxHello {
  int32_t pid = 0;
  int32_t fd = -1;  // the creator's descriptor of the memfd; -1 for the other ranks
  uint64_t inode = 0;
};

}  // namespace

ProcessMailbox::~ProcessMailbox() {
  if (base_) munmap(base_, bytes_);
}

ProcessMailbox::Slot* ProcessMailbox::slot(int from, int to, uint64_t seq) {
  size_t pair = size_t(localIndex_[from]) * nlocal_ + localIndex_[to];
  return static_cast<Slot*>(base_) + pair * kDepth + seq % kDepth;
}

ncclResult_t ProcessMailbox::setup(Bootstrap* bootstrap, const std::vector<bool>& local, size_t inboxWords,
                                   const Deadline& deadline, const std::atomic<bool>* abort) {
  const int n = bootstrap->nranks(), me = bootstrap->rank();
  localIndex_.assign(n, -1);
  int creator = -1;
  for (int r = 0; r < n; ++r)
    if (local[r]) {
      localIndex_[r] = nlocal_++;
      if (creator < 0) creator = r;
    }
  const size_t notes = size_t(nlocal_) * nlocal_ * kDepth, records = size_t(nlocal_) * kDepth;
  // The inboxes start on a page of their own: the device maps whole pages.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto pageUp = [page](size_t b) { return (b + page - 1) / page * page; };
  inboxWords_ = inboxWords;
  inboxOffset_ = pageUp(notes * sizeof(Slot) + records * sizeof(Record));
  bytes_ = inboxOffset_ + pageUp(size_t(nlocal_) * inboxWords * sizeof(uint32_t));
  std::vector<MailboxHello> hellos(n);
  hellos[me].pid = getpid();
  int fd = -1;
  void* mapped = nullptr;
  if (nlocal_ < 2) creator = -1;  // nobody to talk to on this host: only the meetings
  if (me == creator) {
    fd = memfd_create("gyre-p2p-mailbox", MFD_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes_)) != 0 || fstat(fd, &st) != 0 ||
        (mapped = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
      int e = errno;
      if (fd >= 0) close(fd);
      return fail(ncclSystemError, "device send/recv between processes: cannot make the %zu-byte shared mailbox "
                  "(%s)", bytes_, strerror(e));
    }
    for (size_t i = 0; i < notes; ++i) new (static_cast<Slot*>(mapped) + i) Slot{};
    Record* firstRecord = reinterpret_cast<Record*>(static_cast<Slot*>(mapped) + notes);
    for (size_t i = 0; i < records; ++i) new (firstRecord + i) Record{};
    hellos[me].fd = fd;
    hellos[me].inode = static_cast<uint64_t>(st.st_ino);
  }
  ncclResult_t r = bootstrap->allGather(hellos.data(), sizeof(MailboxHello), deadline, abort);
  if (r == ncclSuccess && me != creator && creator >= 0) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", hellos[creator].pid, hellos[creator].fd);
    int theirs = open(path, O_RDWR | O_CLOEXEC);
    struct stat st {};
    if (theirs < 0 || fstat(theirs, &st) != 0 || static_cast<uint64_t>(st.st_ino) != hellos[creator].inode ||
        (mapped = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, theirs, 0)) == MAP_FAILED) {
      int e = errno;
      mapped = nullptr;
      r = fail(ncclSystemError, "device send/recv between processes: rank %d cannot map rank %d's shared mailbox "
               "%s (%s)", me, creator, path, theirs < 0 ? strerror(e) : "not the file rank announced");
    }
    if (theirs >= 0) close(theirs);
  }
  // Every rank reports whether it mapped the mailbox, so all agree; the
  // creator keeps its descriptor open until then.
  std::vector<int32_t> ok(n, 0);
  ok[me] = r == ncclSuccess ? 1 : 0;
  ncclResult_t agreed = bootstrap->allGather(ok.data(), sizeof(int32_t), deadline, abort);
  if (fd >= 0) close(fd);
  if (r == ncclSuccess) r = agreed;
  for (int p = 0; p < n && r == ncclSuccess; ++p)
    if (!ok[p]) r = fail(ncclSystemError, "device send/recv between processes: rank %d could not map its host's "
                         "shared mailbox", p);
  if (r != ncclSuccess) {
    if (mapped && mapped != MAP_FAILED) munmap(mapped, bytes_);
    return r;
  }
  base_ = creator >= 0 ? mapped : nullptr;
  return ncclSuccess;
}

uint32_t* ProcessMailbox::inboxes(size_t* bytes) const {
  *bytes = base_ ? bytes_ - inboxOffset_ : 0;
  return base_ ? reinterpret_cast<uint32_t*>(static_cast<char*>(base_) + inboxOffset_) : nullptr;
}

uint32_t* ProcessMailbox::inboxOf(int rank) const {
  size_t bytes = 0;
  uint32_t* first = inboxes(&bytes);
  return first ? first + size_t(localIndex_[rank]) * inboxWords_ : nullptr;
}

void ProcessMailbox::detach(void** base, size_t* bytes) {
  *base = base_;
  *bytes = bytes_;
  base_ = nullptr;
}

ProcessMailbox::Record* ProcessMailbox::record(int rank, uint64_t seq) {
  Record* first = reinterpret_cast<Record*>(static_cast<Slot*>(base_) + size_t(nlocal_) * nlocal_ * kDepth);
  return first + size_t(localIndex_[rank]) * kDepth + seq % kDepth;
}

bool ProcessMailbox::postRecord(int rank, uint64_t seq, const void* data, size_t bytes) {
  Record* r = record(rank, seq);
  if (seq >= kDepth && (r->posted.load(std::memory_order_acquire) != seq - kDepth + 1 ||
                        r->collected.load(std::memory_order_acquire) != uint32_t(nlocal_ - 1)))
    return false;
  memcpy(r->data, data, bytes);
  r->collected.store(0, std::memory_order_relaxed);
  r->posted.store(seq + 1, std::memory_order_release);
  return true;
}

bool ProcessMailbox::post(int from, int to, uint64_t seq, const SendNote& note, const Deadline& deadline,
                          const std::atomic<bool>* abort) {
  Slot* s = slot(from, to, seq);
  // The slot's previous note (seq - kDepth) must have been taken.
  for (unsigned spins = 0; seq >= kDepth && s->taken.load(std::memory_order_acquire) < seq - kDepth + 1; ++spins) {
    if ((spins & 1023) == 1023 && (deadline.expired() || (abort && abort->load()))) return false;
    if (spins > 4096) {
      struct timespec ts = {0, 20000};
      nanosleep(&ts, nullptr);
    }
  }
  s->note = note;
  s->posted.store(seq + 1, std::memory_order_release);
  return true;
}

bool ProcessMailbox::takeOnce(Slot* s, uint64_t seq, SendNote* note) {
  if (s->posted.load(std::memory_order_acquire) != seq + 1) return false;
  *note = s->note;
  s->taken.store(seq + 1, std::memory_order_release);
  return true;
}

}  // namespace gyre
