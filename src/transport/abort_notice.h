// What a rank reports when a peer's abort notice reaches it: every transport
// carries the notice its own way (a slot flag, a shared word, a side socket)
// but says the same thing.
#pragma once

#include <cstdint>

#include "include/gyre.h"

namespace gyre {

// The culprit a notice from `peer` names as it came off the wire: a value
// that is no rank of the `nranks`-rank communicator (0: size unknown, any
// rank number passes) blames the peer that sent it, so a garbled or lying
// notice is still reported (never mistaken for "no notice") and never passed
// on to other ranks as a rank that does not exist.
int culpritFromNotice(uint64_t named, int peer, int nranks);

// The error for a notice from `reporter` naming `named` (as it came off the
// wire), received by `self`: `reporter` gave up and blames that rank, which
// may be this rank itself (its call did not match the peer's, or it
// stalled). A notice naming no rank of the communicator is reported as the
// reporter's lie. With `culprit`, also stores the rank to blame there
// (culpritFromNotice of the notice and its reporter).
ncclResult_t failFromAbortNotice(uint64_t named, int self, int reporter, int nranks, int* culprit = nullptr);

}  // namespace gyre
