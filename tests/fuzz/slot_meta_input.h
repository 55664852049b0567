// The slot_meta target's input begins with this rank's own side of a step
// (record_seeds writes its seeds the same way), then the header the peer sent.
#pragma once

#include <cstdint>

namespace gyre::fuzz {

struct OwnStep {
  uint64_t opCount;
  uint64_t count;
  uint32_t bytes;
  int32_t root;
  int32_t rank;
  int32_t peer;
  uint32_t slotBytes;
  uint8_t coll;
  uint8_t datatype;
  uint8_t op;
};

}  // namespace gyre::fuzz
