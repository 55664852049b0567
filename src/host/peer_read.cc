#include "src/host/peer_read.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "src/call/coll_kind.h"
#include "src/debug/error.h"

namespace gyre {

ncclResult_t readPeer(const LaneSpec& spec, HostComm* comm, int peer, uint64_t remote, void* local, size_t bytes) {
  const PeerInfo& info = (*comm->peers)[peer];
  size_t done = 0;
  while (done < bytes) {
    iovec to{static_cast<char*>(local) + done, bytes - done};
    iovec from{reinterpret_cast<void*>(remote + done), bytes - done};
    ssize_t got = process_vm_readv(info.pid, &to, 1, &from, 1, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    int err = got == 0 ? EFAULT : errno;
    if (err == EINTR) continue;
    ncclResult_t r = fail(ncclSystemError,
                          "%s #%llu: single-copy read of %zu bytes at 0x%llx from rank %d (pid %d on %s) failed "
                          "after %zu bytes: %s%s",
                          collName(spec.coll), static_cast<unsigned long long>(spec.opCount), bytes,
                          static_cast<unsigned long long>(remote), peer, info.pid, info.host, done, strerror(err),
                          err == EFAULT ? " (the peer's buffer is not mapped: freed or unmapped during the call?)"
                                        : "");
    comm->markFailed(r, peer);
    return r;
  }
  return ncclSuccess;
}

}  // namespace gyre
