// Single-copy reads and writes of a peer's user buffer (Linux cross-memory
// attach), for the steps flagged kStepPeerRead / kStepPeerWrite (src/sched/step.h). The communicator
// enables them only where a probe at init could read every neighbour
// (src/comm/single_copy.h); the peer stays inside the same call until this
// rank acknowledges, so the buffer is live unless the application freed it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "include/gyre.h"
#include "src/host/host_comm.h"
#include "src/sched/lane_spec.h"
#include "src/transport/transport.h"

namespace gyre {

// Copies `bytes` from `remote` in rank `peer`'s address space to `local`.
// A failure (the range unmapped: EFAULT; the process gone: ESRCH) fails the
// communicator with an error naming the peer, the collective and the range.
ncclResult_t readPeer(const LaneSpec& spec, HostComm* comm, int peer, uint64_t remote, void* local, size_t bytes);
// Copies `bytes` from `local` to `remote` in rank `peer`'s address space
// (process_vm_writev), failing the same way.
ncclResult_t writePeer(const LaneSpec& spec, HostComm* comm, int peer, uint64_t remote, const void* local,
                       size_t bytes);

// The owner's side of a single-copy step: puts a PeerAddress for `bytes` at
// `src` into the step's line of `out` — or, with `byValueIfPrivate` where
// `src` is not in a shareable allocation, the elements themselves into the
// slot (in the line itself when they fit its 32 bytes).
// Returns whether it announced by reference.
bool announceElements(Connection& out, const void* src, uint32_t bytes, bool byValueIfPrivate);
// The reader's side: where the announced elements can be read in this
// process as they are (the slot, or a mapping of the owner's buffer), or
// nullptr when they must be copied from *remote with readPeer.
// *byReference: whether the owner announced them by reference.
const void* announcedElements(HostComm* comm, const Connection& in, uint32_t bytes, bool byValueIfPrivate,
                              uint64_t* remote, bool* byReference);

}  // namespace gyre
