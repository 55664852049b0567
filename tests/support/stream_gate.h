// Holds a (fake) CUDA stream until the test opens the gate: enqueue
// StreamGate::wait as a host function, then set `open`. Lets a test see that
// calls return before their stream runs, or let another stream run ahead.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

namespace gyre::test {

struct StreamGate {
  std::atomic<bool> open{false};
  static void wait(void* self) {
    auto* g = static_cast<StreamGate*>(self);
    while (!g->open.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
};

}  // namespace gyre::test
