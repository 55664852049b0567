#include "src/device/runtime/deferred_frees.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "src/device/runtime/runtime.h"

namespace gyre {
namespace {

struct PendingFree {
  int device;
  DeferredFree kind;
  void* p;
  std::function<void()> release;  // instead of a free, when set
};

struct FreeQueue {
  std::mutex mutex;
  std::condition_variable drained;
  std::deque<PendingFree> pending;
  std::thread thread;
  bool running = false;
};

// Never destroyed: the thread may still be blocked in a free at exit, when
// the process's end releases the device anyway.
FreeQueue& queue() {
  static FreeQueue* q = new FreeQueue;
  return *q;
}

void makeFree(DeviceRuntime* rt, const PendingFree& f) {
  if (f.device >= 0) rt->setDevice(f.device);
  if (f.release) {
    f.release();
    return;
  }
  switch (f.kind) {
    case DeferredFree::kDevice:
      rt->deviceFree(f.p);  // a failure was recorded by the runtime; nobody waits for it
      break;
    case DeferredFree::kHost:
      rt->freeHost(f.p);
      break;
    case DeferredFree::kMapped:
      rt->freeMapped(f.p);
      break;
  }
}

void run() {
  relaxCaptureModeOfThisThread();  // an application's capture elsewhere must not fail these
  DeviceRuntime* rt = deviceRuntime();
  FreeQueue& q = queue();
  std::unique_lock<std::mutex> lock(q.mutex);
  while (!q.pending.empty()) {
    PendingFree f = q.pending.front();
    q.pending.pop_front();
    lock.unlock();
    makeFree(rt, f);
    lock.lock();
  }
  q.running = false;
  q.drained.notify_all();
}

void hand(PendingFree f) {
  DeviceRuntime* rt = deviceRuntime();
  if (f.device < 0 && rt->currentDevice(&f.device) != ncclSuccess) f.device = -1;
  FreeQueue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  q.pending.push_back(std::move(f));
  if (q.running) return;
  if (q.thread.joinable()) q.thread.join();  // ended: it cleared `running` last
  q.running = true;
  q.thread = std::thread(run);
}

}  // namespace

void freeAfterDeviceWork(DeferredFree kind, void* p, int device) {
  if (!p || !deviceRuntime()) return;
  hand({device, kind, p, nullptr});
}

void releaseAfterDeviceWork(std::function<void()> release, int device) {
  if (!release) return;
  if (!deviceRuntime()) {
    release();
    return;
  }
  hand({device, DeferredFree::kDevice, nullptr, std::move(release)});
}

bool waitForDeferredFrees(double seconds) {
  FreeQueue& q = queue();
  std::unique_lock<std::mutex> lock(q.mutex);
  if (!q.drained.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return !q.running; })) return false;
  if (q.thread.joinable()) q.thread.join();
  return true;
}

}  // namespace gyre
