// libgyre_fakecuda.so, the fake CUDA runtime of the tests: host memory as
// device memory, each stream's work run in order through the device's
// hardware queues (hardware_queues.h), several devices with peer access
// (fake_devices.h), the collective kernels emulated on host threads
// (host_emulation.h). gyre loads
// it with GYRE_FAKE_CUDA=1 or 2 (src/device/runtime/runtime.h); the shipped
// libraries contain none of it.
//
// What tests may call besides: CUDA graph capture (while a stream captures,
// the work enqueued on it is recorded instead of run; launching the graph
// enqueues the recorded work again, as often as asked; one stream per
// capture: the fake does not follow captures across streams through events),
// a sticky error, and a count of kernel launches. A test linked against this
// library shares the fake with gyre: gyre's dlopen of libgyre_fakecuda.so
// finds the copy already loaded.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "include/gyre.h"

#define GYRE_FAKE_CUDA_API __attribute__((visibility("default")))

namespace gyre {

struct FakeGraph {
  std::vector<std::function<void()>> ops;
};

GYRE_FAKE_CUDA_API void fakeBeginCapture(cudaStream_t stream, FakeGraph* graph);
GYRE_FAKE_CUDA_API void fakeEndCapture(cudaStream_t stream);
GYRE_FAKE_CUDA_API void fakeLaunchGraph(const FakeGraph& graph, cudaStream_t stream);

// A sticky error, as a kernel's illegal address leaves the context: from now
// on every stream-ordered call and event query of this process fails with
// `cudaErrorText`, as CUDA's calls then return the same error.
GYRE_FAKE_CUDA_API void fakeBreakContext(const char* cudaErrorText);

// Collective kernels this process has launched (a fused group counts once).
GYRE_FAKE_CUDA_API int64_t fakeKernelLaunches();

}  // namespace gyre
