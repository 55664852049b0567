// Test hooks of the fake runtime. CUDA graph capture: while a stream
// captures, the work enqueued on it is recorded instead of run; launching the
// graph enqueues the recorded work again, as often as asked. One stream per
// capture (the fake does not follow captures across streams through events).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "include/gyre.h"

namespace gyre {

struct FakeGraph {
  std::vector<std::function<void()>> ops;
};

void fakeBeginCapture(cudaStream_t stream, FakeGraph* graph);
void fakeEndCapture(cudaStream_t stream);
void fakeLaunchGraph(const FakeGraph& graph, cudaStream_t stream);

// A sticky error, as a kernel's illegal address leaves the context: from now
// on every stream-ordered call and event query of this process fails with
// `cudaErrorText`, as CUDA's calls then return the same error.
void fakeBreakContext(const char* cudaErrorText);

// Collective kernels this process has launched (a fused group counts once).
int64_t fakeKernelLaunches();

}  // namespace gyre
