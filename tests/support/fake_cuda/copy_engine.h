// How the fake CUDA runtime's copies (cudaMemcpyAsync, cudaMemcpy2DAsync and
// the synchronous copies) move memory, as a GPU's copy engine does.
#pragma once

#include <cstddef>

namespace gyre {

// Copies `bytes` from `src` to `dst` as a copy engine moves memory: every
// aligned 4-byte word of the source is read whole, once (a relaxed atomic
// load), and written as whole words where the destination is 4-byte aligned
// (relaxed atomic stores). A copy on one stream may read words that another
// stream's memory operations (cuStreamWriteValue32) or a kernel update
// meanwhile: a watchdog samples flag words that way
// (src/device/device_words.h); and the host may poll a word a copy writes
// into its memory. On a GPU each such word is the old value or the new one;
// a plain memmove would be a data race in C++'s model, which
// ThreadSanitizer reports. A copy that overlaps plain accesses (a kernel's
// or the host's) is still reported. Overlapping ranges (undefined for
// cudaMemcpy) are copied as memmove does.
void copyEngineCopy(void* dst, const void* src, size_t bytes);

}  // namespace gyre
