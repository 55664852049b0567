#include "src/transport/abort_notice.h"

#include <cstdint>

#include "src/debug/error.h"

namespace gyre {

int culpritFromNotice(uint64_t named, int peer, int nranks) {
  const uint64_t limit = nranks > 0 ? static_cast<uint64_t>(nranks) : uint64_t{INT32_MAX} + 1;
  return named < limit ? static_cast<int>(named) : peer;
}

ncclResult_t failFromAbortNotice(uint64_t named, int self, int reporter, int nranks, int* culprit) {
  if (culprit) *culprit = culpritFromNotice(named, reporter, nranks);
  const int namedRank = culpritFromNotice(named, -1, nranks);
  if (namedRank < 0 && nranks > 0)
    return fail(ncclRemoteError, "rank %d sent an abort notice naming rank %llu, which is not a rank of this %d-rank "
                "communicator (a corrupt or lying peer)", reporter, static_cast<unsigned long long>(named), nranks);
  if (namedRank < 0)
    return fail(ncclRemoteError, "rank %d sent an abort notice naming %llu, which is no rank number (a corrupt or "
                "lying peer)", reporter, static_cast<unsigned long long>(named));
  if (namedRank == self)
    return fail(ncclRemoteError, "rank %d gave up on this rank (%d): it reports a mismatched call or a stalled step "
                "from this rank (see rank %d's error)", reporter, self, reporter);
  return fail(ncclRemoteError, "rank %d failed or stopped responding (reported by rank %d)", namedRank, reporter);
}

}  // namespace gyre
