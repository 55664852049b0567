#include "src/device/kernel/lane_images.h"

#include <algorithm>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/device/runtime/deferred_frees.h"

namespace gyre {
namespace {

constexpr size_t kArenaChunkBytes = 4 << 20;

}  // namespace

ncclResult_t ImageArenas::carveFrom(std::vector<Chunk>& chunks, bool device, size_t bytes, void** out) {
  bytes = (bytes + 15) & ~size_t{15};
  if (chunks.empty() || chunks.back().size - chunks.back().used < bytes) {
    Chunk chunk;
    chunk.size = std::max(kArenaChunkBytes, bytes);
    void* p = nullptr;
    RelaxedCapture relaxed;  // a captured call may be the one that grows it
    DeviceRuntime* rt = deviceRuntime();
    GYRE_CHECK(device ? rt->deviceAlloc(chunk.size, &p) : rt->allocHost(chunk.size, &p));
    chunk.base = static_cast<char*>(p);
    chunks.push_back(chunk);
    if (chunks.size() > 1) GYRE_INFO("COLL", "lane arena grows to %zu chunks", chunks.size());
  }
  *out = chunks.back().base + chunks.back().used;
  chunks.back().used += bytes;
  return ncclSuccess;
}

ncclResult_t ImageArenas::carve(size_t bytes, LaneImage* image) {
  GYRE_CHECK(carveFrom(device_, true, bytes, &image->device));
  GYRE_CHECK(carveFrom(host_, false, bytes, &image->host));
  image->bytes = bytes;
  return ncclSuccess;
}

void ImageArenas::release() {
  for (Chunk& c : device_) freeAfterDeviceWork(DeferredFree::kDevice, c.base);
  for (Chunk& c : host_) freeAfterDeviceWork(DeferredFree::kHost, c.base);
  device_.clear();
  host_.clear();
}

ncclResult_t queueImageCopy(const LaneImage& image, StreamHandle stream, bool capturing, bool* queued) {
  *queued = false;
  if (!image.device || (!capturing && image.queuedEagerly)) return ncclSuccess;
  GYRE_CHECK(deviceRuntime()->copyAsync(image.device, image.host, image.bytes, stream));
  *queued = !capturing;
  return ncclSuccess;
}

}  // namespace gyre
