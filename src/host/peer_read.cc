#include "src/host/peer_read.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "src/call/coll_kind.h"
#include "src/debug/error.h"

namespace gyre {
namespace {

// One loop for both directions: the kernel may copy less than asked (a
// signal, a range crossing into an unmapped page), so it goes on from there.
ncclResult_t copyPeer(const LaneSpec& spec, HostComm* comm, int peer, uint64_t remote, void* local, size_t bytes,
                      bool write) {
  const PeerInfo& info = (*comm->peers)[peer];
  size_t done = 0;
  while (done < bytes) {
    iovec mine{static_cast<char*>(local) + done, bytes - done};
    iovec theirs{reinterpret_cast<void*>(remote + done), bytes - done};
    ssize_t got = write ? process_vm_writev(info.pid, &mine, 1, &theirs, 1, 0)
                        : process_vm_readv(info.pid, &mine, 1, &theirs, 1, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    int err = got == 0 ? EFAULT : errno;
    if (err == EINTR) continue;
    ncclResult_t r = fail(ncclSystemError,
                          "%s #%llu: single-copy %s of %zu bytes at 0x%llx %s rank %d (pid %d on %s) failed "
                          "after %zu bytes: %s%s",
                          collName(spec.coll), static_cast<unsigned long long>(spec.opCount), write ? "write" : "read",
                          bytes, static_cast<unsigned long long>(remote), write ? "in" : "from", peer, info.pid,
                          info.host, done, strerror(err),
                          err == EFAULT ? " (the peer's buffer is not mapped: freed or unmapped during the call?)"
                                        : "");
    comm->markFailed(r, peer);
    return r;
  }
  return ncclSuccess;
}

}  // namespace

bool announceElements(Connection& out, const void* src, uint32_t bytes, bool byValueIfPrivate) {
  if (byValueIfPrivate && bytes <= kLineInlineBytes) {
    memcpy(out.fifo.payload(out.step, bytes), src, bytes);
    return false;
  }
  PeerAddress where = describeLocal(src, bytes);
  const bool byValue = byValueIfPrivate && where.fd < 0;
  if (byValue) {
    where.fd = kElementsInSlot;
    memcpy(out.fifo.payload(out.step, bytes), src, bytes);
  }
  memcpy(out.fifo.payload(out.step, sizeof(where)), &where, sizeof(where));
  return !byValue;
}

const void* announcedElements(HostComm* comm, const Connection& in, uint32_t bytes, bool byValueIfPrivate,
                              uint64_t* remote, bool* byReference) {
  *byReference = false;
  if (byValueIfPrivate && bytes <= kLineInlineBytes) return in.fifo.payload(in.step, bytes);
  PeerAddress where;
  memcpy(&where, in.fifo.payload(in.step, sizeof(where)), sizeof(where));
  if (byValueIfPrivate && where.fd == kElementsInSlot) return in.fifo.payload(in.step, bytes);
  *byReference = true;
  *remote = where.address;
  return comm->peerMappings.locate(in.peer, (*comm->peers)[in.peer].pid, where, bytes);
}

ncclResult_t readPeer(const LaneSpec& spec, HostComm* comm, int peer, uint64_t remote, void* local, size_t bytes) {
  return copyPeer(spec, comm, peer, remote, local, bytes, false);
}

ncclResult_t writePeer(const LaneSpec& spec, HostComm* comm, int peer, uint64_t remote, const void* local,
                       size_t bytes) {
  return copyPeer(spec, comm, peer, remote, const_cast<void*>(local), bytes, true);
}

}  // namespace gyre
