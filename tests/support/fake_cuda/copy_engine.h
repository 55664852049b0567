// How the fake CUDA runtime's copies (cudaMemcpyAsync, cudaMemcpy2DAsync and
// the synchronous copies) move memory, as a GPU's copy engine does.
#pragma once

#include <cstddef>

namespace gyre {

// Copies `bytes` from `src` to `dst`, reading every aligned 4-byte word of
// the source whole, once, with a relaxed atomic load. A copy on one stream
// may read words that another stream's memory operations
// (cuStreamWriteValue32) or a kernel update meanwhile: a watchdog samples
// flag words that way (src/device/device_words.h), and on a GPU each word
// it reads is the old value or the new one. A plain memmove would be a data
// race in C++'s model, which ThreadSanitizer reports; the destination is
// written plainly, so a copy that overwrites memory some other work still
// touches is still reported. Overlapping ranges (undefined for cudaMemcpy)
// are copied as memmove does.
void copyEngineCopy(void* dst, const void* src, size_t bytes);

}  // namespace gyre
