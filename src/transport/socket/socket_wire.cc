#include "src/transport/socket/socket_wire.h"

#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/transport/abort_notice.h"
#include "src/transport/socket/socket_pieces.h"

namespace gyre::socket_detail {

ncclResult_t readCounts(SocketCounts* out) {
  int64_t nthreads = 1, nsocks = 1;
  GYRE_CHECK(env::getInt("NCCL_SOCKET_NTHREADS", &nthreads));
  GYRE_CHECK(env::getInt("NCCL_NSOCKS_PERTHREAD", &nsocks));
  if (nthreads * nsocks > kMaxDataSockets)
    return fail(ncclInvalidArgument, "NCCL_SOCKET_NTHREADS=%lld x NCCL_NSOCKS_PERTHREAD=%lld exceeds %d sockets per "
                "connection", static_cast<long long>(nthreads), static_cast<long long>(nsocks), kMaxDataSockets);
  out->nthreads = static_cast<int>(nthreads);
  out->nsocks = static_cast<int>(nsocks);
  return ncclSuccess;
}

ncclResult_t checkSocketParams(const SocketParams& theirs, size_t slotBytes, const SocketCounts& mine,
                               const std::string& what, int peer, int rank) {
  if (theirs.slotBytes != slotBytes)
    return fail(ncclInvalidUsage, "%s: rank %d uses %llu-byte steps, this rank %zu (NCCL_BUFFSIZE differs)",
                what.c_str(), peer, static_cast<unsigned long long>(theirs.slotBytes), slotBytes);
  // Both sides must cut payloads into the same pieces. The peer's counts are
  // multiplied in 64 bits: they come off the network and may be anything.
  const int64_t total = int64_t{theirs.nthreads} * theirs.nsocks;
  if (theirs.nthreads < 1 || theirs.nsocks < 1 || total != mine.total())
    return fail(ncclInvalidUsage, "%s: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD differs between ranks: rank %d "
                "has %d x %d = %lld sockets per connection, this rank (%d) %d x %d = %d; set them alike on every rank",
                what.c_str(), peer, theirs.nthreads, theirs.nsocks, static_cast<long long>(total), rank,
                mine.nthreads, mine.nsocks, mine.total());
  return ncclSuccess;
}

ncclResult_t checkIncomingHeader(const SlotMeta& m, size_t slotBytes, int peer, int nranks, const std::string& what,
                                 int* noticeCulprit) {
  if (m.flags & kMetaAbort) {
    *noticeCulprit = culpritFromNotice(m.count, peer, nranks);
    return ncclSuccess;
  }
  if (m.bytes > slotBytes)
    return fail(ncclInternalError, "%s: rank %d sent a %u-byte step into %zu-byte slots", what.c_str(), peer, m.bytes,
                slotBytes);
  return ncclSuccess;
}

}  // namespace gyre::socket_detail
