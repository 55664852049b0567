#include "src/host/peer_credits.h"

#include "src/host/host_comm.h"

namespace gyre {

ncclResult_t checkPeerCredits(const std::vector<std::unique_ptr<Lane>>& lanes) {
  for (const auto& l : lanes) {
    const LaneSpec& s = l->spec();
    for (size_t i = 0; i < s.nsend; ++i) {
      const Connection& c = *s.send[i];
      const uint64_t head = loadAcquire(c.fifo.head);
      if (head <= c.step) continue;
      ncclResult_t r = fail(ncclRemoteError,
                            "%s #%llu (channel %d): rank %d acknowledged %llu steps on its connection from rank %d, "
                            "which has sent only %llu (an acknowledgement of steps never sent)",
                            collName(s.coll), static_cast<unsigned long long>(s.opCount), s.channel, c.peer,
                            static_cast<unsigned long long>(head), s.rank, static_cast<unsigned long long>(c.step));
      l->comm()->markFailed(r, c.peer);
      return r;
    }
  }
  return ncclSuccess;
}

}  // namespace gyre
