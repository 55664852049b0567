#include "src/device/runtime/deferred_frees.h"

#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "src/debug/fork_guard.h"
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
  bool running = false;   // the thread has not ended
  bool stopping = false;  // the process exits: what is left stays
};

// How long exit waits for frees still pending: a device that never lets
// them through must not hold the process's end (which frees it all).
constexpr double kExitWaitSeconds = 2;

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
  while (!q.pending.empty() && !q.stopping) {
    PendingFree f = q.pending.front();
    q.pending.pop_front();
    lock.unlock();
    makeFree(rt, f);
    lock.lock();
  }
  q.running = false;
  q.drained.notify_all();
}

void stopAtExit() {
  FreeQueue& q = queue();
  std::unique_lock<std::mutex> lock(q.mutex);
  q.stopping = true;
  // A thread still blocked in a free after this is left to the process's end,
  // which releases the device anyway.
  q.drained.wait_for(lock, std::chrono::duration<double>(kExitWaitSeconds), [&] { return !q.running; });
}

void hand(PendingFree f) {
  DeviceRuntime* rt = deviceRuntime();
  if (f.device < 0 && rt->currentDevice(&f.device) != ncclSuccess) f.device = -1;
  FreeQueue& q = queue();
  std::lock_guard<std::mutex> lock(q.mutex);
  q.pending.push_back(std::move(f));
  if (q.running || q.stopping) return;
  static std::once_flag atExit;
  std::call_once(atExit, [] { atexit(stopAtExit); });
  q.running = true;
  // Detached, and waited for through `running` (waitForDeferredFrees, and
  // at exit): a finished thread left unjoined would outlive destroy in a
  // process that ends with _exit. A fork while it runs leaves the child a
  // queue without its thread, so it holds a ForkHazard.
  std::thread([hazard = ForkHazard()] { run(); }).detach();
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
  return q.drained.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return !q.running; });
}

}  // namespace gyre
