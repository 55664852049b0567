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
// enqueues the recorded work again, as often as asked), under CUDA's capture
// rules (capture_rules.h: modes per thread, the calls a capture forbids,
// captures that spread to other streams only through events), a sticky
// error, and a count of kernel launches. A test linked against this
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

// cudaStreamCaptureMode's values.
constexpr int kFakeCaptureGlobal = 0;
constexpr int kFakeCaptureThreadLocal = 1;
constexpr int kFakeCaptureRelaxed = 2;

// cudaStreamBeginCapture(stream, mode), cudaStreamEndCapture and
// cudaGraphLaunch: each returns the CUDA error number the driver would
// (0: success; fakeCudaErrorName names the others). A failed end leaves the
// graph empty. Global is what PyTorch's and nccl-tests' captures use.
GYRE_FAKE_CUDA_API int fakeBeginCapture(cudaStream_t stream, FakeGraph* graph, int mode = kFakeCaptureGlobal);
GYRE_FAKE_CUDA_API int fakeEndCapture(cudaStream_t stream);
GYRE_FAKE_CUDA_API int fakeLaunchGraph(const FakeGraph& graph, cudaStream_t stream);
GYRE_FAKE_CUDA_API const char* fakeCudaErrorName(int error);

// A sticky error, as a kernel's illegal address leaves the context: from now
// on every stream-ordered call and event query of this process fails with
// `cudaErrorText`, as CUDA's calls then return the same error.
GYRE_FAKE_CUDA_API void fakeBreakContext(const char* cudaErrorText);

// Collective kernels this process has launched (a fused group counts once).
GYRE_FAKE_CUDA_API int64_t fakeKernelLaunches();

// What this process holds now: cudaMalloc'd allocations not freed, CUDA IPC
// mappings not closed, page-locked host allocations (cudaHostAlloc, mapped
// or not) not freed. A communicator destroyed or aborted leaves these as
// they were before it was made, once its frees have run.
struct FakeHoldings {
  int64_t deviceAllocations = 0;
  int64_t ipcMappings = 0;
  int64_t pinnedHost = 0;
};
GYRE_FAKE_CUDA_API FakeHoldings fakeHoldings();
// cudaIpcOpenMemHandle calls that opened a mapping, since the process began.
GYRE_FAKE_CUDA_API int64_t fakeIpcOpens();

}  // namespace gyre
