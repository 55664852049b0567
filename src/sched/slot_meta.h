// What every step stamps into the slot it sends (SlotMeta: the call's
// sequence number, collective, count, type and operator), and the error a
// receiver raises when a peer's stamp is not its own call. Host lanes and
// the device kernels' status report share both, so a mismatch reads the same
// whichever executor found it.
#pragma once

#include <cstdint>

#include "include/gyre.h"
#include "src/sched/lane_spec.h"
#include "src/transport/fifo.h"

namespace gyre {

SlotMeta makeSlotMeta(const LaneSpec& spec, uint32_t bytes);

// The error for a step whose metadata (`sent` by `sender`) is not this rank's
// own call (`own`).
// `note` is appended (a step found where this rank's call does not look).
ncclResult_t failMismatchedCalls(int sender, const SlotMeta& sent, int self, const SlotMeta& own,
                                 const char* note = "");

// Checks the metadata `got` that `sender` stamped into a step this rank
// receives against its own step `want` (this rank's call, `expectedBytes`
// of payload): a different call is failMismatchedCalls's error, a different
// size names the sender and both sizes.
ncclResult_t checkPeerSlotMeta(int sender, const SlotMeta& got, int self, const SlotMeta& want, CollKind coll);

}  // namespace gyre
