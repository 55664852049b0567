// Chunking arithmetic shared by schedule builders: how a buffer is cut into
// ring segments and pipeline chunks. Pure functions, unit-tested.
#pragma once

#include <algorithm>
#include <cstddef>

namespace gyre {

inline size_t divUp(size_t a, size_t b) { return (a + b - 1) / b; }
inline size_t roundUp(size_t a, size_t b) { return divUp(a, b) * b; }

// Elements per alignment unit: segments start on 16-byte boundaries so copy
// and reduce loops (and GPU vector loads) see aligned data.
inline size_t alignElements(size_t typeSize) { return std::max<size_t>(1, 16 / typeSize); }

// Elements one pipeline step may carry: a FIFO slot's bytes, rounded down to
// the alignment unit (never zero).
inline size_t chunkElements(size_t slotBytes, size_t typeSize) {
  size_t align = alignElements(typeSize);
  size_t elems = slotBytes / typeSize / align * align;
  return std::max(elems, align);
}

struct Segment {
  size_t offset;
  size_t count;
};

// Segment `index` of `parts` nearly equal, aligned pieces of [base, base+span).
// Trailing segments may be empty when span is small; every rank computes the
// same cut, so an empty segment is skipped consistently by sender and receiver.
inline Segment splitSegment(size_t base, size_t span, size_t parts, size_t index, size_t align) {
  size_t per = roundUp(divUp(span, parts), align);
  size_t begin = std::min(index * per, span);
  size_t end = std::min(begin + per, span);
  return {base + begin, end - begin};
}

}  // namespace gyre
