// A copy whose stores bypass the caches (non-temporal, "streaming" stores),
// for a collective's large output. A plain memcpy into a destination that is
// not in the caches first reads every line it writes (the write-allocate),
// so memory moves each destination byte twice; a streaming store writes the
// line whole, once. It pays only where the destination would not stay in
// the caches anyway and nothing reads it soon: docs/CALIBRATION.md has the
// measurements and the threshold (GYRE_STREAMING_STORES_MIN_BYTES) that
// decides it per call.
#pragma once

#include <cstddef>

namespace gyre {

// memcpy with streaming stores where the CPU has them (x86-64), memcpy
// elsewhere. dst and src must not overlap. The stores are fenced before it
// returns: a flag published after it (a FIFO step, a call's completion) is
// seen after the bytes, as with memcpy.
void copyStreaming(void* dst, const void* src, size_t bytes);

}  // namespace gyre
