#include "src/device/staged/staging_worker.h"

#include <chrono>

#include "src/debug/error.h"
#include "src/device/on_device.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

ncclResult_t StagingWorker::start(int device) {
  void* host = nullptr;
  void* dev = nullptr;
  GYRE_CHECK(deviceRuntime()->allocMapped(sizeof(uint32_t), &host, &dev));
  hostFlag_ = static_cast<uint32_t*>(host);
  deviceFlag_ = static_cast<uint32_t*>(dev);
  __atomic_store_n(hostFlag_, 0u, __ATOMIC_RELEASE);
  device_ = device;
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
  return ncclSuccess;
}

ncclResult_t StagingWorker::enqueue(const Piece& piece, StreamHandle stream) {
  uint32_t value;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    value = ++issued_;
    queue_.push_back({piece, value});
  }
  wake_.notify_one();
  return deviceRuntime()->streamWaitFlag(stream, deviceFlag_, value);
}

void StagingWorker::loop() {
  DeviceRuntime* rt = deviceRuntime();
  enterDeviceOfThisThread(device_);
  relaxCaptureModeOfThisThread();
  for (;;) {
    std::pair<Piece, uint32_t> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      item = queue_.front();
      queue_.pop_front();
    }
    const Piece& p = item.first;
    // The input copies are queued ahead of the event: it completes unless
    // the stream is stuck behind other work.
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(p.timeoutSeconds);
    bool ready = false;
    const char* why = nullptr;
    for (int spins = 0;; ++spins) {
      if (rt->eventQuery(p.inputReady, &ready) != ncclSuccess) {
        why = "the CUDA context failed before the piece's input reached host memory";
        break;
      }
      if (ready) break;
      if (std::chrono::steady_clock::now() >= until) {
        why = "the stream did not bring the piece's input to host memory within GYRE_TIMEOUT";
        break;
      }
      // Spin briefly (a piece's input is usually a copy away), then sleep.
      if (spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
      else std::this_thread::yield();
    }
    rt->eventDestroy(p.inputReady);
    if (why) p.abandon(p.arg, why);
    else p.run(p.arg);
    // The stream's wait passes; after an abandoned piece it copies back
    // whatever the host buffer holds, and the job's error says why.
    __atomic_store_n(hostFlag_, item.second, __ATOMIC_RELEASE);
  }
}

void StagingWorker::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  freeAfterDeviceWork(DeferredFree::kMapped, hostFlag_);
  hostFlag_ = deviceFlag_ = nullptr;
}

}  // namespace gyre
