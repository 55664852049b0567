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

}  // namespace gyre
