#include "transport/shm/shm_segment.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/debug/error.h"

namespace gyre {

void ShmMapping::fillFifo(Fifo* fifo) const {
  ShmHeader* h = header();
  fifo->slots = static_cast<char*>(base) + kShmSlotsOffset;
  fifo->slotBytes = h->slotBytes;
  fifo->meta = h->meta;
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
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  if (base == MAP_FAILED) {
    int e = errno;
    ::close(f);
    return fail(ncclSystemError, "shared memory to rank %d: cannot map a %zu-byte segment (%s)", receiver, bytes,
                strerror(e));
  }
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
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED)
    return fail(ncclSystemError, "shared memory from rank %d: cannot map a %zu-byte segment (%s)", sender, bytes,
                strerror(errno));
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
