// Shorthand for schedule builders.
#pragma once

#include <cstddef>

#include "src/sched/step.h"

namespace gyre {

inline Step step(StepKind kind, uint8_t srcBuf, size_t srcOff, uint8_t dstBuf, size_t dstOff, size_t count,
                 uint8_t flags) {
  Step s{};
  s.kind = kind;
  s.srcBuffer = srcBuf;
  s.dstBuffer = dstBuf;
  s.flags = flags;
  s.count = static_cast<uint32_t>(count);
  s.srcOffset = srcOff;
  s.dstOffset = dstOff;
  return s;
}

}  // namespace gyre
