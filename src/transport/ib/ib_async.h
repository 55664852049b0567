// Asynchronous device events. While connections use a device, one thread
// per device context reads ibv_get_async_event; a fatal event (the port
// going down, a QP or CQ entering the error state, the device failing)
// marks the connections it hits failed, so a call waiting on them ends at
// its next test() with an error naming the device, the port and the event,
// instead of waiting for a completion error (a dead port may complete
// nothing until the QP's retry timeout, seconds to minutes) or GYRE_TIMEOUT.
//
// The thread starts with the first connection on the context and is joined
// when the last one closes (ncclCommDestroy/ncclCommAbort close them all).
#pragma once

#include <string>

#include "src/transport/ib/ib_comm.h"

namespace gyre::ib {

// `c` (its port, QPs and CQ set) starts hearing its device's events.
void asyncAttach(IbComm* c);
// Before `c` is destroyed; joins the device's thread if `c` was its last user.
void asyncDetach(IbComm* c);

// The fatal event that hit `c`, or "" (cheap: one atomic load when none).
std::string asyncFailure(const IbComm* c);

// Event threads running now (tests).
int asyncThreadCount();

}  // namespace gyre::ib
