#include "src/host/foreign_steps.h"

#include <algorithm>
#include <cstdio>

#include "src/host/host_comm.h"
#include "src/host/wait.h"
#include "src/sched/slot_meta.h"

namespace gyre {

ncclResult_t checkForeignSteps(const std::vector<std::unique_ptr<Lane>>& lanes) {
  thread_local std::vector<Connection*> used, receivers;
  used.clear();
  for (const auto& l : lanes)
    for (size_t i = 0; i < l->spec().nrecv; ++i) used.push_back(l->spec().recv[i]);
  for (size_t at = 0; at < lanes.size(); ++at) {
    HostComm* comm = lanes[at]->comm();
    bool seen = false;  // each communicator once
    for (size_t k = 0; k < at; ++k) seen |= lanes[k]->comm() == comm;
    if (seen) continue;
    receivers.clear();
    comm->progress.appendReadableReceivers(&receivers);
    for (Connection* c : receivers) {
      if (std::find(used.begin(), used.end(), c) != used.end() || !recvDataReady(*c)) continue;
      const SlotMeta got = c->fifo.metaOf(c->step);
      // Send/Recv numbers its steps per connection, not per call.
      if (got.flags != 0 || got.coll == static_cast<uint8_t>(CollKind::SendRecv)) continue;
      for (const auto& l : lanes) {
        const LaneSpec& s = l->spec();
        if (l->comm() != comm || s.coll == CollKind::SendRecv || static_cast<uint32_t>(s.opCount) != got.opCount)
          continue;
        char note[160];
        snprintf(note, sizeof(note), "; rank %d's step came on a connection this rank's call does not use "
                 "(channel connections of another algorithm)", c->peer);
        ncclResult_t r = failMismatchedCalls(c->peer, got, comm->rank, makeSlotMeta(s, got.bytes), note);
        comm->markFailed(r, c->peer);
        return r;
      }
    }
  }
  return ncclSuccess;
}

}  // namespace gyre
