#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "src/sched/chunking.h"

using namespace gyre;

TEST_CASE("chunk elements fill a slot, stay aligned and are never zero") {
  CHECK(chunkElements(524288, 4) == 131072);
  CHECK(chunkElements(524288, 8) == 65536);
  CHECK(chunkElements(100, 4) == 24);  // rounded down to 16-byte units
  CHECK(chunkElements(3, 8) == 2);     // never below one alignment unit
  for (size_t ts : {1, 2, 4, 8})
    for (size_t slot : {4096, 65536, 524288, 999}) {
      size_t c = chunkElements(slot, ts);
      CHECK(c > 0);
      CHECK(c % alignElements(ts) == 0);
    }
}

TEST_CASE("ring segments cover the span exactly once, in order, aligned") {
  for (size_t span : {1, 2, 7, 13, 64, 1000, 4099, 65537})
    for (size_t parts : {1, 2, 3, 4, 7})
      for (size_t align : {1, 2, 4, 16}) {
        size_t next = 100;  // base
        for (size_t i = 0; i < parts; ++i) {
          Segment s = splitSegment(100, span, parts, i, align);
          CHECK(s.offset == next);
          if (s.count && i + 1 < parts) CHECK((s.offset - 100) % align == 0);
          next = s.offset + s.count;
        }
        CHECK(next == 100 + span);
      }
}

TEST_CASE("no ring segment exceeds the chunk when the span is at most parts*chunk") {
  for (size_t chunk : {4, 16, 128})
    for (size_t parts : {2, 3, 4})
      for (size_t span = 1; span <= parts * chunk; span += 5)
        for (size_t i = 0; i < parts; ++i) CHECK(splitSegment(0, span, parts, i, 4).count <= chunk);
}
