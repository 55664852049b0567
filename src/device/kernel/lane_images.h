// Where a communicator's cached kernel inputs live — each call shape's lanes
// and steps, each fused launch's block table — and how they reach the GPU
// without the host waiting for it. An image is carved from two arenas:
// device memory the kernel reads, and page-locked host memory holding the
// same bytes. The copy between them is queued on the stream of a launch that
// reads the image, just ahead of the kernel. A synchronous copy would wait
// behind every command queued on its hardware queue: calls would stop being
// asynchronous, and one thread launching the kernels of several
// communicators in a group could block behind a kernel that waits for a
// later one of them until GYRE_TIMEOUT.
#pragma once

#include <cstddef>
#include <vector>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

struct LaneImage {
  void* device = nullptr;
  void* host = nullptr;  // page-locked: a copy from it does not wait for the stream
  size_t bytes = 0;
  // An uncaptured launch queued the copy ahead of its kernel: the
  // communicator's later uncaptured launches follow that kernel
  // (StreamCompletions::followLast), so they need no copy of their own.
  bool queuedEagerly = false;
};

// Chunks both halves of the images are carved from: allocated at init and
// when full, never per call (cudaMalloc and cudaHostAlloc are slow, and may
// synchronise).
class ImageArenas {
 public:
  // `bytes` (16-byte aligned) in both arenas; the caller fills image->host.
  // 0 bytes at init: the first chunks, so no call has to allocate them.
  ncclResult_t carve(size_t bytes, LaneImage* image);
  void release();

 private:
  struct Chunk {
    char* base = nullptr;
    size_t size = 0, used = 0;
  };
  ncclResult_t carveFrom(std::vector<Chunk>& chunks, bool device, size_t bytes, void** out);
  std::vector<Chunk> device_, host_;
};

// Queues `image`'s copy on `stream`, ahead of the launch about to read it,
// unless an uncaptured launch of the communicator queued it already. A
// captured launch always records its own: the graph may run on any stream,
// before or after the eager launches. *queued: whether this call queued it
// (the caller marks it queuedEagerly once its uncaptured launch is noted).
ncclResult_t queueImageCopy(const LaneImage& image, StreamHandle stream, bool capturing, bool* queued);

}  // namespace gyre
