// The fake CUDA runtime's multi-device rules (tests/support/fake_cuda/
// fake_devices.h), one case per rule: contexts made per process and device
// as the driver makes them, and CUDA's "Stream and Event Behavior" — the
// fake refuses, with the driver's error, what the driver refuses across
// devices, and allows what it allows. gyre's multi-device tests rely on
// these rules to find a missing device switch before an 8-GPU node does.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"
#include "src/kernels/direct_work.h"
#include "src/kernels/flag_work.h"
#include "src/kernels/pair_copy_work.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "tests/support/fake_cuda/fake_devices.h"

namespace {

using gyre::DeviceRuntime;
using gyre::EventHandle;

DeviceRuntime* rt() {
  DeviceRuntime* r = gyre::deviceRuntime();
  REQUIRE(r != nullptr);
  return r;
}

std::string lastError() { return ncclGetLastError(nullptr); }
bool says(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

uint32_t bit(int device) { return 1u << device; }

// Runs `fn` in a forked child, whose fake has made no context yet (contexts
// are counted per process): its exit status, 0 when every check held. The
// child reports a failed check on stderr.
int inFreshProcess(const std::function<int()>& fn) {
  pid_t pid = fork();
  if (pid == 0) {
    int code = gyre::fakeContextDevices() == 0 ? fn() : 99;
    _exit(code);
  }
  REQUIRE(pid > 0);
  int status = 0;
  for (int i = 0; i < 600; ++i) {  // 30 s at most
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return 101;
}

#define CHILD_CHECK(cond)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                    \
    }                                                              \
  } while (0)

// A flag kernel that stores `value` to `flag`: the smallest kernel launch.
gyre::FlagOps writeOf(uint32_t* flag, uint32_t value) {
  gyre::FlagOps ops;
  ops.add(flag, value, gyre::FlagOpKind::kWrite);
  return ops;
}

cudaStream_t streamOn(int device) {
  REQUIRE(rt()->setDevice(device) == ncclSuccess);
  cudaStream_t s = nullptr;
  REQUIRE(rt()->streamCreate(&s) == ncclSuccess);
  return s;
}

}  // namespace

// These two run first and in children: the rest of the binary makes contexts.
TEST_CASE("a thread's first CUDA call without cudaSetDevice makes a context on device 0, and only there",
          "[device][devices]") {
  CHECK(inFreshProcess([] {
          int failed = 0;
          std::thread([&failed] {
            failed = [] {
              int current = -1;
              // cudaGetDevice makes no context.
              gyre::deviceRuntime()->currentDevice(&current);
              CHILD_CHECK(current == 0);
              CHILD_CHECK(gyre::fakeContextDevices() == 0);
              EventHandle e = nullptr;
              CHILD_CHECK(gyre::deviceRuntime()->eventCreate(&e) == ncclSuccess);
              gyre::deviceRuntime()->eventDestroy(e);
              return 0;
            }();
          }).join();
          CHILD_CHECK(failed == 0);
          CHILD_CHECK(gyre::fakeContextDevices() == bit(0));
          return 0;
        }) == 0);
}

TEST_CASE("a process that sets its device on every thread first has a context on that device alone",
          "[device][devices]") {
  CHECK(inFreshProcess([] {
          auto work = [] {
            DeviceRuntime* r = gyre::deviceRuntime();
            r->setDevice(3);
            void* p = nullptr;
            EventHandle e = nullptr;
            bool done = false;
            if (r->deviceAlloc(64, &p) != ncclSuccess || r->eventCreate(&e) != ncclSuccess ||
                r->eventQuery(e, &done) != ncclSuccess)
              return;
            r->eventDestroy(e);
            r->deviceFree(p);
          };
          work();
          std::thread(work).join();
          CHILD_CHECK(gyre::fakeContextDevices() == bit(3));
          // A second thread that forgets cudaSetDevice adds device 0's.
          std::thread([] {
            bool capturing = false;
            gyre::deviceRuntime()->isCapturing(nullptr, &capturing);
          }).join();
          CHILD_CHECK(gyre::fakeContextDevices() == (bit(3) | bit(0)));
          return 0;
        }) == 0);
}

TEST_CASE("a kernel launched into a stream of another device than the current fails with "
          "cudaErrorInvalidResourceHandle, and runs with the stream's device current", "[device][devices]") {
  cudaStream_t s = streamOn(2);
  uint32_t* flag = nullptr;
  REQUIRE(rt()->deviceAlloc(sizeof(uint32_t), reinterpret_cast<void**>(&flag)) == ncclSuccess);
  REQUIRE(rt()->memsetSync(flag, 0, sizeof(uint32_t)) == ncclSuccess);
  REQUIRE(rt()->setDevice(5) == ncclSuccess);
  gyre::DeviceLaunch collective{};
  gyre::DirectCall direct{};
  gyre::PairCopyWork pairs{};
  const std::pair<const char*, std::function<ncclResult_t()>> launches[] = {
      {"flag kernel launch", [&] { return rt()->launchFlagOps(writeOf(flag, 7), s); }},
      {"collective kernel launch", [&] { return rt()->launchKernel(collective, s); }},
      {"direct kernel launch", [&] { return rt()->launchDirect(direct, s); }},
      {"point-to-point kernel launch", [&] { return rt()->launchPairCopies(pairs, s); }}};
  for (const auto& [name, launch] : launches) {
    CAPTURE(name);
    CHECK(launch() == ncclUnhandledCudaError);
    CHECK(says(lastError(), name));
    CHECK(says(lastError(), "cudaErrorInvalidResourceHandle"));
    CHECK(says(lastError(), "the stream belongs to device 2 but device 5 is current"));
  }
  REQUIRE(rt()->streamSynchronize(s) == ncclSuccess);
  CHECK(__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0u);  // nothing ran
  CHECK_FALSE(rt()->contextBroken());                    // and the error is not sticky
  REQUIRE(rt()->setDevice(2) == ncclSuccess);
  REQUIRE(rt()->launchFlagOps(writeOf(flag, 7), s) == ncclSuccess);
  REQUIRE(rt()->streamSynchronize(s) == ncclSuccess);
  CHECK(__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 7u);
  rt()->deviceFree(flag);
  rt()->streamDestroy(s);
}

TEST_CASE("cudaEventRecord of an event into a stream of another device fails with cudaErrorInvalidResourceHandle",
          "[device][devices]") {
  cudaStream_t s1 = streamOn(1);
  cudaStream_t s4 = streamOn(4);
  REQUIRE(rt()->setDevice(1) == ncclSuccess);
  EventHandle e = nullptr;
  REQUIRE(rt()->eventCreate(&e) == ncclSuccess);  // an event of device 1
  CHECK(rt()->eventRecord(e, s4) == ncclUnhandledCudaError);
  CHECK(says(lastError(), "cudaEventRecord failed"));
  CHECK(says(lastError(), "cudaErrorInvalidResourceHandle"));
  CHECK(says(lastError(), "the event belongs to device 1, the stream to device 4"));
  // Not even with the stream's device current: the event's device decides.
  REQUIRE(rt()->setDevice(4) == ncclSuccess);
  CHECK(rt()->eventRecord(e, s4) == ncclUnhandledCudaError);
  // Into its own device's stream it records, whatever device is current.
  CHECK(rt()->eventRecord(e, s1) == ncclSuccess);
  rt()->eventDestroy(e);
  rt()->streamDestroy(s1);
  rt()->streamDestroy(s4);
}

TEST_CASE("copies, cudaStreamWaitEvent, cudaEventQuery and cudaStreamSynchronize work across devices",
          "[device][devices]") {
  cudaStream_t s0 = streamOn(0);
  cudaStream_t s6 = streamOn(6);
  // A copy into device 6's stream from device 0's memory, device 0 current.
  REQUIRE(rt()->setDevice(0) == ncclSuccess);
  int32_t* src = nullptr;
  REQUIRE(rt()->deviceAlloc(16 * sizeof(int32_t), reinterpret_cast<void**>(&src)) == ncclSuccess);
  for (int i = 0; i < 16; ++i) src[i] = i * 3 + 1;
  REQUIRE(rt()->setDevice(6) == ncclSuccess);
  int32_t* dst = nullptr;
  REQUIRE(rt()->deviceAlloc(16 * sizeof(int32_t), reinterpret_cast<void**>(&dst)) == ncclSuccess);
  REQUIRE(rt()->setDevice(0) == ncclSuccess);
  // Device 6's stream waits for an event of device 0 before it copies.
  EventHandle ready = nullptr;
  REQUIRE(rt()->eventCreate(&ready) == ncclSuccess);
  REQUIRE(rt()->eventRecord(ready, s0) == ncclSuccess);
  CHECK(rt()->streamWaitEvent(s6, ready) == ncclSuccess);
  CHECK(rt()->copyAsync(dst, src, 16 * sizeof(int32_t), s6) == ncclSuccess);
  // An event of device 6, recorded with device 6 current, queried and
  // waited for with device 0 current.
  REQUIRE(rt()->setDevice(6) == ncclSuccess);
  EventHandle copied = nullptr;
  REQUIRE(rt()->eventCreate(&copied) == ncclSuccess);
  REQUIRE(rt()->eventRecord(copied, s6) == ncclSuccess);
  REQUIRE(rt()->setDevice(0) == ncclSuccess);
  CHECK(rt()->streamWaitEvent(s0, copied) == ncclSuccess);
  CHECK(rt()->streamSynchronize(s6) == ncclSuccess);
  CHECK(rt()->streamSynchronize(s0) == ncclSuccess);
  bool done = false;
  CHECK(rt()->eventQuery(copied, &done) == ncclSuccess);
  CHECK(done);
  for (int i = 0; i < 16; ++i) CHECK(dst[i] == i * 3 + 1);
  rt()->eventDestroy(ready);
  rt()->eventDestroy(copied);
  rt()->deviceFree(src);
  rt()->deviceFree(dst);
  rt()->streamDestroy(s0);
  rt()->streamDestroy(s6);
}

TEST_CASE("the null stream is the current device's: kernels launch into it on whichever device is current",
          "[device][devices]") {
  uint32_t* flags = nullptr;
  REQUIRE(rt()->allocHost(2 * sizeof(uint32_t), reinterpret_cast<void**>(&flags)) == ncclSuccess);
  flags[0] = flags[1] = 0;
  for (int device : {3, 7}) {
    REQUIRE(rt()->setDevice(device) == ncclSuccess);
    CHECK(rt()->launchFlagOps(writeOf(&flags[device == 3 ? 0 : 1], uint32_t(device)), nullptr) == ncclSuccess);
    CHECK(rt()->streamSynchronize(nullptr) == ncclSuccess);
  }
  CHECK(flags[0] == 3u);
  CHECK(flags[1] == 7u);
  rt()->freeHost(flags);
}

namespace {

// How long `free` took while device 0's stream waited on a flag that
// another thread sets after `holdMs`; the flag set before the free returned
// shows the free waited for the device rather than for the clock.
struct FreeBehindWait {
  double seconds = 0;
  bool releasedFirst = false;
};
FreeBehindWait freeBehindAWait(int freeOnDevice, const std::function<void()>& free, int holdMs = 300) {
  cudaStream_t s = streamOn(0);
  void* p = nullptr;
  REQUIRE(rt()->deviceAlloc(sizeof(uint32_t), &p) == ncclSuccess);
  auto* flag = static_cast<uint32_t*>(p);
  __atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
  REQUIRE(rt()->streamWaitFlag(s, flag, 1) == ncclSuccess);
  std::atomic<bool> released{false};
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(holdMs));
    released = true;
    __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
  });
  REQUIRE(rt()->setDevice(freeOnDevice) == ncclSuccess);
  const auto start = std::chrono::steady_clock::now();
  free();
  FreeBehindWait out;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.releasedFirst = released.load();
  releaser.join();
  REQUIRE(rt()->streamSynchronize(s) == ncclSuccess);
  REQUIRE(rt()->setDevice(0) == ncclSuccess);
  REQUIRE(rt()->deviceFree(flag) == ncclSuccess);
  rt()->streamDestroy(s);
  return out;
}

}  // namespace

TEST_CASE("cudaFree synchronises with the memory's device: it returns only after the stream wait queued before it "
          "is released, and a free on another device does not wait for it",
          "[device][devices][free]") {
  void* mine = nullptr;
  REQUIRE(rt()->setDevice(0) == ncclSuccess);
  REQUIRE(rt()->deviceAlloc(4096, &mine) == ncclSuccess);
  FreeBehindWait same = freeBehindAWait(0, [&] { CHECK(rt()->deviceFree(mine) == ncclSuccess); });
  CHECK(same.releasedFirst);
  CHECK(same.seconds >= 0.25);

  void* other = nullptr;
  REQUIRE(rt()->setDevice(1) == ncclSuccess);
  REQUIRE(rt()->deviceAlloc(4096, &other) == ncclSuccess);
  FreeBehindWait elsewhere = freeBehindAWait(1, [&] { CHECK(rt()->deviceFree(other) == ncclSuccess); });
  CHECK_FALSE(elsewhere.releasedFirst);
  CHECK(elsewhere.seconds < 0.25);
}

TEST_CASE("cudaFreeHost synchronises with the current device, for page-locked and mapped host memory alike",
          "[device][devices][free]") {
  void* pinned = nullptr;
  REQUIRE(rt()->setDevice(0) == ncclSuccess);
  REQUIRE(rt()->allocHost(4096, &pinned) == ncclSuccess);
  FreeBehindWait host = freeBehindAWait(0, [&] { rt()->freeHost(pinned); });
  CHECK(host.releasedFirst);
  CHECK(host.seconds >= 0.25);

  void* mappedHost = nullptr;
  void* mappedDevice = nullptr;
  REQUIRE(rt()->allocMapped(4096, &mappedHost, &mappedDevice) == ncclSuccess);
  FreeBehindWait mapped = freeBehindAWait(0, [&] { rt()->freeMapped(mappedHost); });
  CHECK(mapped.releasedFirst);
  CHECK(mapped.seconds >= 0.25);
}

TEST_CASE("the fake's holdings count what a process has allocated, mapped and pinned, and fall back after the frees",
          "[device][devices][free]") {
  REQUIRE(rt()->setDevice(0) == ncclSuccess);
  const gyre::FakeHoldings before = gyre::fakeHoldings();
  void* d = nullptr;
  void* h = nullptr;
  void* mh = nullptr;
  void* md = nullptr;
  REQUIRE(rt()->deviceAlloc(100, &d) == ncclSuccess);
  REQUIRE(rt()->allocHost(100, &h) == ncclSuccess);
  REQUIRE(rt()->allocMapped(100, &mh, &md) == ncclSuccess);
  const gyre::FakeHoldings during = gyre::fakeHoldings();
  CHECK(during.deviceAllocations == before.deviceAllocations + 1);
  CHECK(during.pinnedHost == before.pinnedHost + 2);
  REQUIRE(rt()->deviceFree(d) == ncclSuccess);
  rt()->freeHost(h);
  rt()->freeMapped(mh);
  const gyre::FakeHoldings after = gyre::fakeHoldings();
  CHECK(after.deviceAllocations == before.deviceAllocations);
  CHECK(after.pinnedHost == before.pinnedHost);
  CHECK(after.ipcMappings == before.ipcMappings);
}
