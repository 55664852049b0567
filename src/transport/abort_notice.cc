#include "src/transport/abort_notice.h"

#include <cstdint>

#include "src/debug/error.h"

namespace gyre {

ncclResult_t failFromAbortNotice(int culprit, int self, int reporter) {
  if (culprit == self)
    return fail(ncclRemoteError, "rank %d gave up on this rank (%d): it reports a mismatched call or a stalled step "
                "from this rank (see rank %d's error)", reporter, self, reporter);
  return fail(ncclRemoteError, "rank %d failed or stopped responding (reported by rank %d)", culprit, reporter);
}

int culpritFromNotice(uint64_t named, int peer) {
  return named <= static_cast<uint64_t>(INT32_MAX) ? static_cast<int>(named) : peer;
}

}  // namespace gyre
