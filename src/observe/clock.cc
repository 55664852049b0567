#include "src/observe/clock.h"

namespace gyre {
namespace {

struct ClockOrigin {
  uint64_t ticks = readTicks();
  std::chrono::steady_clock::time_point time = std::chrono::steady_clock::now();
};

// Read at library load, so by the time counters are shown the span measured
// is the process's life so far.
const ClockOrigin origin;

}  // namespace

double secondsPerTick() {
#if defined(__x86_64__)
  // A span under 10 ms measures the rate poorly: wait it out (only when
  // counters are shown that early in a process's life).
  auto now = std::chrono::steady_clock::now();
  while (now - origin.time < std::chrono::milliseconds(10)) now = std::chrono::steady_clock::now();
  const uint64_t ticks = readTicks() - origin.ticks;
  const double seconds = std::chrono::duration<double>(now - origin.time).count();
  return ticks ? seconds / static_cast<double>(ticks) : 1e-9;
#else
  return 1e-9;
#endif
}

}  // namespace gyre
