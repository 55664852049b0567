// What a rank reports when a peer's abort notice reaches it: every transport
// carries the notice its own way (a slot flag, a shared word, a side socket)
// but says the same thing.
#pragma once

#include <cstdint>

#include "include/gyre.h"

namespace gyre {

// `reporter` gave up and blames `culprit`; `self` is this rank. The culprit
// may be this rank itself: its call did not match the peer's, or it stalled.
ncclResult_t failFromAbortNotice(int culprit, int self, int reporter);

// The culprit a notice from `peer` names as it came off the wire: a value
// that is no rank number blames the peer that sent it, so a garbled or lying
// notice is still reported (never mistaken for "no notice").
int culpritFromNotice(uint64_t named, int peer);

}  // namespace gyre
