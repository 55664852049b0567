// A point in time after which a wait gives up. Every wait on a peer takes one.
#pragma once

#include <chrono>
#include <cstdint>

namespace gyre {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline afterSeconds(double seconds) {
    return Deadline(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(seconds)));
  }
  static Deadline afterMs(int64_t ms) { return Deadline(Clock::now() + std::chrono::milliseconds(ms)); }

  bool expired() const { return Clock::now() >= at_; }

  // Milliseconds left, clamped to [0, cap] so it can be passed to poll().
  int remainingMs(int cap = 1 << 30) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left < 0) return 0;
    return left > cap ? cap : static_cast<int>(left);
  }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

}  // namespace gyre
