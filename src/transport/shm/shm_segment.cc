#include "src/transport/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/debug/error.h"

namespace gyre {
namespace {

// Touches one byte per page from this process (the sender rewrites the zero
// its pages hold). Without it the first use of each FIFO slot in a
// collective paid for the page: ~350 us per 128 KiB step for the first 8
// steps, on a VM even with MAP_POPULATE, which made benchmarks with a few
// warm-up calls (nccl-tests' default 5 < 8 slots) several times slower
// out of place, the mode they time first.
void touchPages(void* base, size_t bytes, bool write) {
  volatile char* p = static_cast<volatile char*>(base);
  for (size_t off = 0; off < bytes; off += 4096) {
    if (write) p[off] = 0;
    else (void)p[off];
  }
}

}  // namespace

void ShmMapping::fillFifo(Fifo* fifo) const {
  ShmHeader* h = header();
  fifo->slots = static_cast<char*>(base) + kShmSlotsOffset;
  fifo->slotBytes = h->slotBytes;
  fifo->meta = &h->lines[0].meta;
  fifo->metaStride = sizeof(SlotLine);
  fifo->linePayloads = static_cast<char*>(base) + kShmLinePayloadsOffset;
  fifo->tail = &h->tail;
  fifo->head = &h->head;
}

void ShmMapping::unmap() {
  if (base) munmap(base, bytes);
  base = nullptr;
  bytes = 0;
}

ncclResult_t createShmSegment(uint64_t secret, int sender, int receiver, int channel, size_t slotBytes, int* fd,
                              ShmMapping* out) {
  const size_t bytes = shmSegmentBytes(slotBytes);
  char name[64];
  snprintf(name, sizeof(name), "gyre-shm-%d-%d-%d", sender, receiver, channel);  // shows in /proc/PID/maps only
  int f = memfd_create(name, MFD_CLOEXEC);
  if (f < 0)
    return fail(ncclSystemError, "shared memory to rank %d: memfd_create failed (%s); set NCCL_SHM_DISABLE=1 to "
                "use sockets", receiver, strerror(errno));
  if (ftruncate(f, static_cast<off_t>(bytes)) != 0) {
    int e = errno;
    ::close(f);
    return fail(ncclSystemError, "shared memory to rank %d: cannot size a %zu-byte segment (%s)", receiver, bytes,
                strerror(e));
  }
  // Allocate every page now (see touchPages), so a segment the system cannot
  // back fails here with a message instead of a SIGBUS inside a collective.
  if (fallocate(f, 0, 0, static_cast<off_t>(bytes)) != 0 && errno != EOPNOTSUPP) {
    int e = errno;
    ::close(f);
    return fail(ncclSystemError, "shared memory to rank %d: cannot allocate a %zu-byte segment (%s); set "
                "NCCL_SHM_DISABLE=1 to use sockets", receiver, bytes, strerror(e));
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, f, 0);
  if (base == MAP_FAILED) {
    int e = errno;
    ::close(f);
    return fail(ncclSystemError, "shared memory to rank %d: cannot map a %zu-byte segment (%s)", receiver, bytes,
                strerror(e));
  }
  touchPages(base, bytes, true);
  out->base = base;
  out->bytes = bytes;
  ShmHeader* h = out->header();  // the file starts zeroed: counters, sleepers and abort words are 0
  h->secret = secret;
  h->sender = sender;
  h->receiver = receiver;
  h->channel = channel;
  h->slotBytes = slotBytes;
  __atomic_store_n(&h->magic, kShmMagic, __ATOMIC_RELEASE);
  *fd = f;
  return ncclSuccess;
}

ncclResult_t mapShmSegment(int fd, uint64_t secret, int sender, int receiver, int channel, size_t slotBytes,
                           ShmMapping* out) {
  const size_t bytes = shmSegmentBytes(slotBytes);
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes)
    return fail(ncclInternalError, "shared memory from rank %d: the segment has %lld bytes, expected %zu", sender,
                static_cast<long long>(st.st_size), bytes);
  // Map (and touch) every page now, not one fault at a time inside a collective.
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED)
    return fail(ncclSystemError, "shared memory from rank %d: cannot map a %zu-byte segment (%s)", sender, bytes,
                strerror(errno));
  touchPages(base, bytes, false);
  out->base = base;
  out->bytes = bytes;
  const ShmHeader* h = out->header();
  if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != kShmMagic || h->secret != secret || h->sender != sender ||
      h->receiver != receiver || h->channel != channel || h->slotBytes != slotBytes) {
    out->unmap();
    return fail(ncclInternalError, "shared memory from rank %d: the segment is not the one for channel %d "
                "(header mismatch)", sender, channel);
  }
  return ncclSuccess;
}

}  // namespace gyre
