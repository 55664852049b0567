// Whether a peer process on this host still runs: what the watchdogs of the
// cross-process device paths ask before they blame a silent peer.
#pragma once

namespace gyre {

// Gone, or a zombie its parent has not reaped yet (kill(pid, 0) still works then).
bool processGone(int pid);

}  // namespace gyre
