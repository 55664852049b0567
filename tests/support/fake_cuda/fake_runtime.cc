#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/support/fake_cuda/capture_rules.h"
#include "tests/support/fake_cuda/copy_engine.h"
#include "tests/support/fake_cuda/host_emulation.h"
#include "tests/support/fake_cuda/fake_cuda.h"
#include "tests/support/fake_cuda/fake_devices.h"
#include "tests/support/fake_cuda/hardware_queues.h"
#include "src/debug/error.h"
#include "src/device/runtime/runtime.h"
#include "src/kernels/pair_copy_loop.h"

namespace gyre {
namespace {

// One stream: its work goes in order to the hardware queue the stream was
// given (hardware_queues.h), unless the stream captures.
class FakeStream {
 public:
  FakeStream(int device, HardwareQueue* queue, ResidentBlocks* residency)
      : device_(device), queue_(queue), residency_(residency) {}
  int device() const { return device_; }  // the device current when the stream was made

  // `blocks` > 0: a kernel of that many blocks.
  void push(std::function<void()> op, CommandKind kind = CommandKind::kStarted, int blocks = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capture_) {  // recorded into the graph instead of run (cudaStreamBeginCapture)
      capture_->push_back(std::move(op));
      return;
    }
    queue_->submit(order_, kind, std::move(op), blocks, residency_);
  }

  void beginCapture(std::vector<std::function<void()>>* graph) {
    std::lock_guard<std::mutex> lock(mutex_);
    capture_ = graph;
  }
  void endCapture() {
    std::lock_guard<std::mutex> lock(mutex_);
    capture_ = nullptr;
  }
  bool capturing() {
    std::lock_guard<std::mutex> lock(mutex_);
    return capture_ != nullptr;
  }

  void synchronize() { order_->synchronize(); }
  bool idle() { return order_->idle(); }
  const std::shared_ptr<StreamOrder>& order() const { return order_; }

 private:
  std::mutex mutex_;
  std::vector<std::function<void()>>* capture_ = nullptr;
  const int device_;
  HardwareQueue* const queue_;
  ResidentBlocks* const residency_;
  const std::shared_ptr<StreamOrder> order_ = std::make_shared<StreamOrder>();
};

// An event completes generation g when the stream it was recorded on reaches
// the record; a wait blocks its stream until the generation recorded before
// the wait was issued has completed (CUDA's semantics).
struct FakeEvent {
  explicit FakeEvent(int device) : device(device) {}
  const int device;  // current when the event was made: records go only into this device's streams
  std::mutex mutex;
  std::condition_variable done;
  uint64_t recorded = 0;
  uint64_t completed = 0;
};

// What fresh fake device memory holds (deviceAlloc).
constexpr int kUninitializedByte = 0xA5;
// Blocks of the point-to-point kernel on the fake, at least: three, so sizes
// rarely divide evenly among them.
constexpr int kFakePairCopyBlocks = 3;

class FakeRuntime final : public DeviceRuntime {
 public:
  FakeRuntime(bool synchronous, int blockThreads) : synchronous_(synchronous), blockThreads_(blockThreads) {}
  const char* name() const override { return "fake (GYRE_FAKE_CUDA)"; }
  bool synchronousForTests() const override { return synchronous_; }

  // cudaGetDevice: makes no context (device 0 for a thread that never set one).
  ncclResult_t currentDevice(int* device) override {
    *device = device_;
    return ncclSuccess;
  }
  bool hasDevice() override { return true; }
  // cudaSetDevice makes the device's primary context (CUDA 12 does at once).
  ncclResult_t setDevice(int device) override {
    if (device < 0 || device >= kDevices)
      return fail(ncclInvalidArgument, "fake CUDA: device %d does not exist (0..%d)", device, kDevices - 1);
    device_ = device;
    inContext();
    return ncclSuccess;
  }
  // Every call but the device queries above runs in the current device's
  // primary context, which the first such call makes: a thread that never
  // called cudaSetDevice makes one on device 0 (about 0.5 GB of a GPU).
  void inContext() { contexts_.fetch_or(1u << device_, std::memory_order_relaxed); }
  uint32_t contextDevices() const { return contexts_.load(std::memory_order_relaxed); }
  // The fake's "device memory" is ordinary memory (tests pass std::vector
  // storage): everything but its page-locked host allocations counts.
  ncclResult_t isDevicePointer(const void* p, bool* isDevice) override {
    inContext();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = hostAllocations_.upper_bound(p);
    bool pinnedHost = it != hostAllocations_.begin() &&
                      static_cast<const char*>(p) < static_cast<const char*>(std::prev(it)->first) + std::prev(it)->second;
    *isDevice = p != nullptr && !pinnedHost;
    return ncclSuccess;
  }
  // "Device memory" is a shared mapping of a memfd, so another process can
  // map it from an IPC handle (its /proc/<pid>/fd/<fd> path), as CUDA IPC
  // maps a cudaMalloc'd region. As CUDA does, small allocations are carved
  // out of shared 2 MiB blocks, and IPC shares (and refuses to open twice)
  // the whole block.
  ncclResult_t deviceAlloc(size_t bytes, void** out) override {
    inContext();
    GYRE_CHECK(allowed(capture_.unsafeCall(), "cudaMalloc"));
    const size_t size = bytes == 0 ? 1 : bytes;
    const size_t rounded = (size + kSubAllocAlign - 1) / kSubAllocAlign * kSubAllocAlign;
    std::lock_guard<std::mutex> lock(mutex_);
    const bool small = rounded <= kSmallAllocMax;
    void* block = small ? smallBlock_ : nullptr;
    if (block && blocks_[block].used + rounded > blocks_[block].size) block = nullptr;
    if (!block) GYRE_CHECK(newBlock(small ? kBlockBytes : size, &block));
    if (small) smallBlock_ = block;
    Block& b = blocks_[block];
    char* p = static_cast<char*>(block) + b.used;
    b.used += rounded;
    ++b.live;
    // cudaMalloc does not clear memory (it may hand back a freed buffer, a
    // destroyed communicator's FIFO): fresh fake memory holds a pattern, so
    // code that needs zeros must clear it, here as on a GPU.
    memset(p, kUninitializedByte, size);
    allocations_[p] = {size, block, ++allocationSerial_};
    devices_.own(p, size, device_);
    *out = p;
    return ncclSuccess;
  }
  ncclResult_t deviceFree(void* p) override {
    inContext();
    if (!p) return ncclSuccess;
    GYRE_CHECK(allowed(capture_.unsafeCall(), "cudaFree"));
    const int owner = devices_.ownerOf(p);
    awaitDeviceWork(owner >= 0 ? owner : device_, "cudaFree");
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.find(p);
    if (it == allocations_.end()) return fail(ncclInvalidArgument, "fake CUDA: %p is not device memory", p);
    void* block = it->second.block;
    allocations_.erase(it);
    devices_.disown(p);
    Block& b = blocks_[block];
    if (--b.live > 0) return ncclSuccess;
    if (smallBlock_ == block) smallBlock_ = nullptr;
    Block gone = b;
    blocks_.erase(block);
    releaseWhenIdle([block, gone] {
      munmap(block, gone.size);
      ::close(gone.fd);
    });
    return ncclSuccess;
  }
  // cudaHostAlloc and cudaFreeHost are unsafe during capture, as cudaMalloc is.
  ncclResult_t allocHost(size_t bytes, void** out) override {
    inContext();
    GYRE_CHECK(allowed(capture_.unsafeCall(), "cudaHostAlloc"));
    return pinHost(bytes, out);
  }
  ncclResult_t pinHost(size_t bytes, void** out) {
    *out = ::operator new(bytes == 0 ? 1 : bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    hostAllocations_[*out] = bytes == 0 ? 1 : bytes;
    return ncclSuccess;
  }
  // A refused cudaFreeHost frees nothing (the memory stays, as on a GPU).
  void freeHost(void* p) override {
    inContext();
    if (allowed(capture_.unsafeCall(), "cudaFreeHost") != ncclSuccess) return;
    awaitDeviceWork(device_, "cudaFreeHost");
    unpinHost(p);
  }
  void unpinHost(void* p) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hostAllocations_.erase(p);
      releaseWhenIdle([p] { ::operator delete(p); });
    }
  }
  // cudaFree and cudaFreeHost synchronise with the device, as the driver's
  // do: they return once every command queued on the device's streams
  // before the call has finished, so a free behind a spinning kernel or a
  // stream wait blocks as on a GPU. Where a GPU would hang for good, the
  // fake gives up after kFreeWaitSeconds and ends the process loudly, so a
  // test fails naming the free instead of running into its time limit.
  static constexpr int kFreeWaitSeconds = 30;
  void awaitDeviceWork(int device, const char* call) {
    std::vector<std::pair<std::shared_ptr<StreamOrder>, uint64_t>> marks;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [handle, s] : streams_)
        if (s->device() == device) marks.emplace_back(s->order(), s->order()->queuedSoFar());
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(kFreeWaitSeconds);
    for (const auto& [order, queued] : marks) {
      if (order->awaitFinished(queued, until)) continue;
      fprintf(stderr, "fake CUDA: %s has waited %d s for device %d's queued work (a spinning kernel or a stream "
              "wait nobody releases): on a GPU this free never returns. Ending the process.\n", call,
              kFreeWaitSeconds, device);
      fflush(stderr);
      std::abort();
    }
  }
  // A free on one device does not wait for another's streams, which may
  // still read the memory through peer access: memory freed while any
  // stream has work is unmapped at a moment when none has. mutex_ held.
  void releaseWhenIdle(std::function<void()> release) {
    deferredFrees_.push_back(std::move(release));
    for (const auto& [handle, s] : streams_)
      if (!s->idle()) return;
    for (auto& f : deferredFrees_) f();
    deferredFrees_.clear();
  }
  std::vector<std::function<void()>> deferredFrees_;

  // Copies run into a stream of any device (the driver stages them).
  ncclResult_t copyAsync(void* dst, const void* src, size_t bytes, StreamHandle stream) override {
    inContext();
    if (broken_.load()) return brokenContext("cudaMemcpyAsync");
    GYRE_CHECK(allowed(capture_.enqueue(stream), "cudaMemcpyAsync"));
    stream_(stream).push([=] { copyEngineCopy(dst, src, bytes); });
    return ncclSuccess;
  }
  ncclResult_t copy2DAsync(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t width, size_t rows,
                           StreamHandle stream) override {
    inContext();
    if (broken_.load()) return brokenContext("cudaMemcpy2DAsync");
    GYRE_CHECK(allowed(capture_.enqueue(stream), "cudaMemcpy2DAsync"));
    stream_(stream).push([=] {
      for (size_t r = 0; r < rows; ++r)
        copyEngineCopy(static_cast<char*>(dst) + r * dstPitch, static_cast<const char*>(src) + r * srcPitch, width);
    });
    return ncclSuccess;
  }
  // A fresh address names a fresh stream; destroying one lets its queued
  // work finish first, as CUDA does (without blocking the caller there).
  ncclResult_t streamCreate(StreamHandle* out) override {
    inContext();
    *out = reinterpret_cast<StreamHandle>(new char);
    capture_.streamCreated(*out);
    stream_(*out);  // made now, on the current device
    return ncclSuccess;
  }
  void streamDestroy(StreamHandle stream) override {
    inContext();
    std::unique_ptr<FakeStream> s;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = streams_.find(stream);
      if (it != streams_.end()) {
        s = std::move(it->second);
        streams_.erase(it);
      }
    }
    if (s) s->synchronize();
    capture_.streamDestroyed(stream);
    delete reinterpret_cast<char*>(stream);
  }
  ncclResult_t hostFunc(StreamHandle stream, void (*fn)(void*), void* arg) override {
    inContext();
    if (broken_.load()) return brokenContext("cudaLaunchHostFunc");
    // CUDA may run every host function of a process on one thread.
    GYRE_CHECK(allowed(capture_.enqueue(stream), "cudaLaunchHostFunc"));
    stream_(stream).push([this, fn, arg] {
      std::lock_guard<std::mutex> one(callbackThread_);
      fn(arg);
    });
    return ncclSuccess;
  }
  // A handle owns a reference; queued records and waits hold their own, so
  // destroying a handle with work pending is safe (as in CUDA).
  // An event belongs to the device current when it is made.
  ncclResult_t eventCreate(EventHandle* out) override {
    inContext();
    *out = new std::shared_ptr<FakeEvent>(std::make_shared<FakeEvent>(device_));
    return ncclSuccess;
  }
  void eventDestroy(EventHandle e) override {
    inContext();
    capture_.eventDestroyed(e);
    delete static_cast<std::shared_ptr<FakeEvent>*>(e);
  }
  // CUDA's "Stream and Event Behavior": an event records only into a stream
  // of its own device.
  ncclResult_t eventRecord(EventHandle e, StreamHandle stream) override {
    inContext();
    if (broken_.load()) return brokenContext("cudaEventRecord");
    std::shared_ptr<FakeEvent> ev = *static_cast<std::shared_ptr<FakeEvent>*>(e);
    const int streamDevice = stream_(stream).device();
    if (ev->device != streamDevice)
      return fail(ncclUnhandledCudaError, "cudaEventRecord failed: invalid resource handle "
                  "(cudaErrorInvalidResourceHandle): the event belongs to device %d, the stream to device %d (an event "
                  "records only into a stream of the device it was created on)", ev->device, streamDevice);
    bool captured = false;
    GYRE_CHECK(allowed(capture_.record(e, stream, &captured), "cudaEventRecord"));
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(ev->mutex);
      generation = captured ? ev->recorded : ++ev->recorded;  // a graph's record marks no run of this one
    }
    stream_(stream).push([ev, generation] {
      std::lock_guard<std::mutex> lock(ev->mutex);
      ev->completed = std::max(ev->completed, generation);
      ev->done.notify_all();
    }, CommandKind::kAtHead);
    return ncclSuccess;
  }
  // Across devices too: how one device's stream waits for another's work.
  ncclResult_t streamWaitEvent(StreamHandle stream, EventHandle e) override {
    inContext();
    if (broken_.load()) return brokenContext("cudaStreamWaitEvent");
    std::shared_ptr<FakeEvent> ev = *static_cast<std::shared_ptr<FakeEvent>*>(e);
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(ev->mutex);
      generation = ev->recorded;
    }
    // A wait on an event of a capture joins the stream to it; inside one
    // capture the graph runs its work in issue order, so the edge needs nothing.
    CaptureRules::Graph* joined = nullptr;
    bool edge = false;
    GYRE_CHECK(allowed(capture_.wait(stream, e, generation > 0, &joined, &edge), "cudaStreamWaitEvent"));
    if (joined) stream_(stream).beginCapture(joined);
    if (edge) return ncclSuccess;
    stream_(stream).push([ev, generation] {
      std::unique_lock<std::mutex> lock(ev->mutex);
      ev->done.wait(lock, [&] { return ev->completed >= generation; });
    }, CommandKind::kAtHead);
    return ncclSuccess;
  }
  // Of any device's event, whatever device is current.
  ncclResult_t eventQuery(EventHandle e, bool* done) override {
    inContext();
    if (broken_.load()) return brokenContext("cudaEventQuery");
    GYRE_CHECK(allowed(capture_.query(e), "cudaEventQuery"));
    std::shared_ptr<FakeEvent> ev = *static_cast<std::shared_ptr<FakeEvent>*>(e);
    std::lock_guard<std::mutex> lock(ev->mutex);
    *done = ev->completed >= ev->recorded;
    return ncclSuccess;
  }
  ncclResult_t isCapturing(StreamHandle stream, bool* capturing) override {
    inContext();
    *capturing = stream_(stream).capturing();
    return ncclSuccess;
  }

  // Graph capture under CUDA's rules (fake_cuda.h, capture_rules.h).
  int beginCapture(StreamHandle stream, FakeGraph* graph, int mode) {
    int error = capture_.begin(stream, &graph->ops, mode);
    if (error == fakecuda::kCaptureOk) stream_(stream).beginCapture(&graph->ops);
    return error;
  }
  int endCapture(StreamHandle stream) {
    std::vector<StreamHandle> members;
    int error = capture_.end(stream, &members);
    for (StreamHandle s : members) stream_(s).endCapture();
    return error;
  }
  int launchGraph(const FakeGraph& graph, StreamHandle stream) {
    if (int error = capture_.enqueue(stream)) return error;
    for (const auto& op : graph.ops) stream_(stream).push(op);
    return fakecuda::kCaptureOk;
  }
  ncclResult_t exchangeCaptureMode(CaptureMode* mode) override {
    *mode = static_cast<CaptureMode>(capture_.exchangeMode(static_cast<int>(*mode)));
    return ncclSuccess;
  }
  ncclResult_t streamSynchronize(StreamHandle stream) override {
    inContext();
    if (broken_.load()) return brokenContext("cudaStreamSynchronize");
    GYRE_CHECK(allowed(capture_.synchronize(stream), "cudaStreamSynchronize"));
    stream_(stream).synchronize();
    if (broken_.load()) return brokenContext("cudaStreamSynchronize");
    return ncclSuccess;
  }

  // As the real adapter does: on a private stream of the current device,
  // which shares a hardware queue with other streams like any stream.
  ncclResult_t copySync(void* dst, const void* src, size_t bytes) override {
    return onPrivateStream("cudaMemcpyAsync", [=] { copyEngineCopy(dst, src, bytes); });
  }
  ncclResult_t memsetSync(void* dst, int value, size_t bytes) override {
    return onPrivateStream("cudaMemsetAsync", [=] { memset(dst, value, bytes); });
  }
  ncclResult_t onPrivateStream(const char* call, std::function<void()> op) {
    inContext();
    if (broken_.load()) return brokenContext(call);
    FakeStream& s = stream_(reinterpret_cast<StreamHandle>(&privateStreams_[device_]));
    s.push(std::move(op));
    s.synchronize();
    if (broken_.load()) return brokenContext("cudaStreamSynchronize");
    return ncclSuccess;
  }
  ncclResult_t postWords(uint32_t* dst, const uint32_t* values, size_t n) override {
    inContext();
    if (broken_.load()) return brokenContext("cuStreamWriteValue32");
    FakeStream& s = stream_(reinterpret_cast<StreamHandle>(&privateStreams_[device_]));
    s.push([dst, words = std::vector<uint32_t>(values, values + n)] {
      for (size_t i = 0; i < words.size(); ++i) __atomic_store_n(dst + i, words[i], __ATOMIC_RELEASE);
    }, CommandKind::kAtHead);
    return ncclSuccess;
  }
  // As the real adapter does: relaxed, so set-up beside a capture is allowed.
  ncclResult_t allocMapped(size_t bytes, void** host, void** device) override {
    inContext();
    GYRE_CHECK(pinHost(bytes, host));
    memset(*host, 0, bytes);
    *device = *host;
    return ncclSuccess;
  }
  // cudaFreeHost, as the real adapter frees it.
  void freeMapped(void* host) override {
    inContext();
    awaitDeviceWork(device_, "cudaFreeHost");
    unpinHost(host);
  }

  // cudaHostRegister: pinned, and the device addresses it where the host does
  // (unified addressing). Every device reaches it.
  ncclResult_t registerHost(void* p, size_t bytes, void** device) override {
    inContext();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!hostAllocations_.emplace(p, bytes == 0 ? 1 : bytes).second)
      return fail(ncclUnhandledCudaError, "cudaHostRegister failed: part or all of the range is already registered "
                  "(cudaErrorHostMemoryAlreadyRegistered)");
    *device = p;
    return ncclSuccess;
  }
  void unregisterHost(void* p) override {
    inContext();
    std::lock_guard<std::mutex> lock(mutex_);
    hostAllocations_.erase(p);
  }

  ncclResult_t ipcGetHandle(void* devicePtr, IpcHandle* out) override {
    inContext();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.find(devicePtr);
    if (it == allocations_.end())
      return fail(ncclInvalidArgument, "fake CUDA: cudaIpcGetMemHandle of %p, which is not a device allocation",
                  devicePtr);
    const Block& b = blocks_[it->second.block];
    const uint64_t offset = static_cast<uint64_t>(static_cast<char*>(devicePtr) - static_cast<char*>(it->second.block));
    FakeIpc h{{'G', 'Y', 'R', 'E', 'F', 'I', 'P', 'C'}, getpid(), b.fd, b.size, b.serial, offset,
              devices_.ownerOf(devicePtr)};
    memset(out, 0, sizeof(*out));
    memcpy(out->bytes, &h, sizeof(h));
    return ncclSuccess;
  }
  ncclResult_t ipcOpenHandle(const IpcHandle& handle, void** out, bool* alreadyMapped) override {
    inContext();
    if (alreadyMapped) *alreadyMapped = false;
    GYRE_CHECK(allowed(capture_.unsafeCall(), "cudaIpcOpenMemHandle"));
    FakeIpc h;
    memcpy(&h, handle.bytes, sizeof(h));
    if (memcmp(h.magic, "GYREFIPC", 8) != 0) return fail(ncclInvalidArgument, "fake CUDA: not an IPC handle");
    if (h.pid == getpid())
      return fail(ncclUnhandledCudaError, "fake CUDA: cudaIpcOpenMemHandle of a handle made by this process "
                                          "(CUDA refuses it too: use the pointer)");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [base, o] : opened_)
        if (o.pid == h.pid && o.serial == h.serial) {
          if (alreadyMapped) {
            *alreadyMapped = true;
            return ncclUnhandledCudaError;
          }
          return fail(ncclUnhandledCudaError, "fake CUDA: cudaIpcOpenMemHandle failed: resource already mapped "
                                              "(cudaErrorAlreadyMapped)");
        }
    }
    std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0)
      return fail(ncclUnhandledCudaError, "fake CUDA: cannot open the memory of process %d (%s): %s", h.pid,
                  path.c_str(), strerror(errno));
    void* p = mmap(nullptr, h.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return fail(ncclUnhandledCudaError, "fake CUDA: cannot map peer memory: %s", strerror(errno));
    std::lock_guard<std::mutex> lock(mutex_);
    opened_[p] = {h.size, h.pid, h.serial};
    ipcOpens_.fetch_add(1, std::memory_order_relaxed);
    devices_.own(p, h.size, h.device, device_);  // cudaIpcMemLazyEnablePeerAccess: this mapping reaches it
    *out = static_cast<char*>(p) + h.offset;
    return ncclSuccess;
  }
  // `p` is what ipcOpenHandle returned: an address inside the mapped block.
  void ipcCloseHandle(void* p) override {
    inContext();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = opened_.upper_bound(p);
    if (it == opened_.begin()) return;
    --it;
    if (static_cast<char*>(p) >= static_cast<char*>(it->first) + it->second.size) return;
    munmap(it->first, it->second.size);
    devices_.disown(it->first);
    opened_.erase(it);
  }
  bool canAccessPeer(int device, int peerDevice) override {
    return device == peerDevice || peerAccessible_.load();
  }
  // Fake device d sits at "bus" d + 1 in every process.
  ncclResult_t busIdOf(int device, int64_t* busId) override {
    *busId = (device + 1) << 16;
    return ncclSuccess;
  }
  bool deviceAtBusId(int64_t busId, int* device) override {
    int d = static_cast<int>(busId >> 16) - 1;
    if (d < 0 || d >= kDevices) return false;
    *device = d;
    return true;
  }
  ncclResult_t allocationOf(const void* p, AllocationInfo* out) override {
    inContext();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = allocations_.upper_bound(const_cast<void*>(p));
    if (it != allocations_.begin()) {
      --it;
      if (static_cast<const char*>(p) < static_cast<const char*>(it->first) + it->second.size) {
        out->base = it->first;
        out->size = it->second.size;
        out->bufferId = it->second.serial;
        out->blockBase = it->second.block;
        return ncclSuccess;
      }
    }
    return fail(ncclInvalidArgument, "fake CUDA: %p is not in a device allocation (cuMemGetAddressRange)", p);
  }
  ncclResult_t streamWaitFlag(StreamHandle stream, const uint32_t* flag, uint32_t value) override {
    inContext();
    if (broken_.load()) return brokenContext("cuStreamWaitValue32");
    GYRE_CHECK(allowed(capture_.enqueue(stream), "cuStreamWaitValue32"));
    FakeStream& s = stream_(stream);
    s.push([this, flag, value, device = s.device()] {
      if (faulted(devices_.unreachable(device, flag, "cuStreamWaitValue32"))) return;
      while (static_cast<int32_t>(__atomic_load_n(flag, __ATOMIC_ACQUIRE) - value) < 0)
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }, CommandKind::kAtHead);
    return ncclSuccess;
  }
  ncclResult_t streamWriteFlag(StreamHandle stream, uint32_t* flag, uint32_t value) override {
    inContext();
    if (broken_.load()) return brokenContext("cuStreamWriteValue32");
    GYRE_CHECK(allowed(capture_.enqueue(stream), "cuStreamWriteValue32"));
    FakeStream& s = stream_(stream);
    s.push([this, flag, value, device = s.device()] {
      if (!faulted(devices_.unreachable(device, flag, "cuStreamWriteValue32")))
        __atomic_store_n(flag, value, __ATOMIC_RELEASE);
    }, CommandKind::kAtHead);
    return ncclSuccess;
  }
  ncclResult_t launchFlagOps(const FlagOps& ops, StreamHandle stream) override {
    inContext();
    if (broken_.load()) return brokenContext("flag kernel launch");
    GYRE_CHECK(allowed(capture_.enqueue(stream), "flag kernel launch"));
    FakeStream& s = stream_(stream);
    GYRE_CHECK(onCurrentDevice(s, "flag kernel launch"));
    s.push([this, ops, device = s.device()] {
      if (!faulted(devices_.unreachable(device, ops))) runFlagOpsOnHost(ops);
    }, CommandKind::kStarted, 1);
    return ncclSuccess;
  }
  ncclResult_t launchPairCopies(const PairCopyWork& work, StreamHandle stream) override {
    inContext();
    if (broken_.load()) return brokenContext("point-to-point kernel launch");
    GYRE_CHECK(allowed(capture_.enqueue(stream), "point-to-point kernel launch"));
    FakeStream& s = stream_(stream);
    GYRE_CHECK(onCurrentDevice(s, "point-to-point kernel launch"));
    // Never fewer than kFakePairCopyBlocks blocks of two threads or more,
    // so the tests' small copies still run the blocks' arrival count.
    const int blocks = std::max<int>(static_cast<int>(pairCopyBlocks(work)), kFakePairCopyBlocks);
    s.push([this, work, blocks, threads = std::max(blockThreads_, 2), device = s.device()] {
      if (!faulted(devices_.unreachable(device, work)) && !faulted(peerAtomicIn(device, work)))
        runPairCopiesOnHost(work, blocks, threads);
    }, CommandKind::kStarted, blocks);
    return ncclSuccess;
  }
  ncclResult_t launchDirect(const DirectCall& call, StreamHandle stream) override {
    inContext();
    if (broken_.load()) return brokenContext("direct kernel launch");
    GYRE_CHECK(allowed(capture_.enqueue(stream), "direct kernel launch"));
    FakeStream& s = stream_(stream);
    GYRE_CHECK(onCurrentDevice(s, "direct kernel launch"));
    s.push([this, call, device = s.device()] {
      if (!faulted(devices_.unreachable(device, call))) runDirectOnHost(call);
    }, CommandKind::kStarted, 1);
    return ncclSuccess;
  }
  // The kernel, as host threads (host_emulation.h) in stream order.
  ncclResult_t launchKernel(const DeviceLaunch& launch, StreamHandle stream) override {
    inContext();
    if (broken_.load()) return brokenContext("collective kernel launch");
    GYRE_CHECK(allowed(capture_.enqueue(stream), "collective kernel launch"));
    FakeStream& s = stream_(stream);
    GYRE_CHECK(onCurrentDevice(s, "collective kernel launch"));
    kernelLaunches_.fetch_add(1);
    s.push([this, launch, threads = blockThreads_, device = s.device()] {
      if (!faulted(devices_.unreachable(device, launch))) runLaunchOnHostThreads(launch, threads);
    }, CommandKind::kStarted, launch.nblocks);
    return ncclSuccess;
  }
  int64_t kernelLaunches() const { return kernelLaunches_.load(); }
  int64_t ipcOpens() const { return ipcOpens_.load(); }
  std::atomic<int64_t> ipcOpens_{0};
  FakeHoldings holdings() {
    std::lock_guard<std::mutex> lock(mutex_);
    FakeHoldings h;
    h.deviceAllocations = static_cast<int64_t>(allocations_.size());
    h.ipcMappings = static_cast<int64_t>(opened_.size());
    h.pinnedHost = static_cast<int64_t>(hostAllocations_.size());
    return h;
  }

  // Several devices and peer access (fake_devices.h).
  ncclResult_t enablePeerAccess(int device, int peerDevice) override {
    inContext();
    if (device == peerDevice) return ncclSuccess;
    if (!canAccessPeer(device, peerDevice))
      return fail(ncclUnhandledCudaError, "cudaDeviceEnablePeerAccess from device %d to device %d failed: peer "
                  "access is not supported between those devices (cudaErrorPeerAccessUnsupported)", device, peerDevice);
    switch (devices_.enablePeerAccess(device, peerDevice)) {
      case FakeDevices::Enable::kInvalidDevice:
        return fail(ncclUnhandledCudaError, "cudaDeviceEnablePeerAccess from device %d to device %d failed: invalid "
                    "device ordinal (cudaErrorInvalidDevice)", device, peerDevice);
      default:  // done, or already enabled (the driver's cudaErrorPeerAccessAlreadyEnabled, which is no failure)
        return ncclSuccess;
    }
  }
  void setPeerAccessible(bool accessible) { peerAccessible_.store(accessible); }
  void setPeerAtomics(bool supported) { peerAtomics_.store(supported); }
  // The point-to-point kernel's only atomics are its arrival counts.
  std::string peerAtomicIn(int device, const PairCopyWork& work) {
    if (peerAtomics_.load()) return "";
    for (int i = 0; i < work.n; ++i) {
      const PairCopy& p = work.pairs[i];
      if (p.role != PairRole::kSecond) continue;
      const uint32_t* counter = p.arrived ? p.arrived : &p.flags->arrived;
      const int owner = devices_.ownerOf(counter);
      if (owner >= 0 && owner != device)
        return "the point-to-point kernel on device " + std::to_string(device) + " made an atomic add on device " +
               std::to_string(owner) + "'s memory, and the two have no native peer atomics (a PCIe pair: "
               "cudaDevP2PAttrNativeAtomicSupported is 0)";
    }
    return "";
  }
  int deviceOf(const void* p) { return devices_.ownerOf(p); }
  bool kernelTouch(const void* p) {
    const std::string why = devices_.unreachable(device_, p, "a kernel");
    if (!faulted(why)) return true;
    fail(ncclUnhandledCudaError, "%s", why.c_str());
    return false;
  }

 private:
  // A kernel touched memory its device cannot reach: the context breaks
  // (sticky, as an illegal address is) and the kernel does nothing more.
  // CUDA's "Stream and Event Behavior": a kernel launches only into a stream
  // of the current device; the launch fails (not sticky) otherwise.
  ncclResult_t onCurrentDevice(FakeStream& s, const char* call) {
    if (s.device() == device_) return ncclSuccess;
    return fail(ncclUnhandledCudaError, "%s failed: invalid resource handle (cudaErrorInvalidResourceHandle): the "
                "stream belongs to device %d but device %d is current (a kernel launches only into a stream of the "
                "current device)", call, s.device(), device_);
  }
  std::atomic<uint32_t> contexts_{0};  // bit d: device d's primary context exists in this process

  bool faulted(const std::string& why) {
    if (why.empty()) return false;
    if (!broken_.load()) breakContext(why.c_str());  // the first fault is the one the context reports
    return true;
  }
  FakeDevices devices_;
  std::atomic<bool> peerAccessible_{true};
  std::atomic<bool> peerAtomics_{true};

 public:

 private:
  static constexpr int kDevices = 8;

  // A call stream capture forbids fails as the adapter reports CUDA's errors.
  static ncclResult_t allowed(int captureError, const char* call) {
    if (captureError == fakecuda::kCaptureOk) return ncclSuccess;
    return fail(ncclUnhandledCudaError, "%s failed: %s (%s)", call, fakecuda::captureErrorString(captureError),
                fakecuda::captureErrorName(captureError));
  }
  using CaptureRules = fakecuda::CaptureRules;
  CaptureRules capture_;

  // fakeBreakContext: every later stream-ordered call fails with its text.
  ncclResult_t brokenContext(const char* call) {
    std::lock_guard<std::mutex> lock(mutex_);
    return fail(ncclUnhandledCudaError, "%s failed: %s", call, brokenText_.c_str());
  }

 public:
  bool contextBroken() override { return broken_.load(); }
  void breakContext(const char* text) {
    std::lock_guard<std::mutex> lock(mutex_);
    brokenText_ = text;
    broken_.store(true);
  }

 private:
  std::atomic<bool> broken_{false};
  std::atomic<int64_t> kernelLaunches_{0};
  uint64_t allocationSerial_ = 0;
  std::string brokenText_;

  // Any handle names a stream (tests make them up); streams live as long as the process.
  FakeStream& stream_(StreamHandle h) {
    // The null stream is the current device's.
    if (h == nullptr) h = reinterpret_cast<StreamHandle>(&nullStreams_[device_]);
    std::lock_guard<std::mutex> lock(mutex_);
    std::unique_ptr<FakeStream>& s = streams_[h];
    if (!s) {
      // Round-robin over the device's hardware queues, in creation order.
      DeviceQueues& d = queues_[device_];
      if (d.queues.empty()) {
        d.queues.resize(hardwareQueuesPerDevice());
        for (auto& q : d.queues) q = std::make_unique<HardwareQueue>();
      }
      HardwareQueue* q = d.queues[d.nextQueue++ % d.queues.size()].get();
      if (!d.residency) d.residency = std::make_unique<ResidentBlocks>(residentBlocks_.load());
      s = std::make_unique<FakeStream>(device_, q, d.residency.get());
    }
    return *s;
  }
  // Never destroyed, like the fake: queue threads may still be finishing.
  struct DeviceQueues {
    std::vector<std::unique_ptr<HardwareQueue>> queues;
    size_t nextQueue = 0;
    std::unique_ptr<ResidentBlocks> residency;
  };
  // Resident-block slots per device (an H100's 132 SMs, a few blocks each),
  // unless a test sets fewer before the device's first stream.
  std::atomic<int> residentBlocks_{528};

 public:
  void setResidentBlocks(int slots) { residentBlocks_.store(slots); }

 private:
  std::map<int, DeviceQueues> queues_;

  static constexpr size_t kBlockBytes = 2 << 20;       // what small allocations are carved from
  static constexpr size_t kSmallAllocMax = 1 << 20;    // larger ones get a block of their own
  static constexpr size_t kSubAllocAlign = 512;
  struct Block {
    int fd;
    size_t size;
    uint64_t serial;  // unique per block: fd numbers are reused, handles must not be
    size_t used = 0;
    int live = 0;     // allocations still in it
  };
  struct Allocation {
    size_t size;
    void* block;
    uint64_t serial;  // the buffer id
  };
  struct FakeIpc {
    char magic[8];
    int32_t pid;
    int32_t fd;       // of the block
    uint64_t size;    // of the block
    uint64_t serial;  // of the block
    uint64_t offset;  // of the allocation in the block
    int32_t device;   // that owns the block
  };
  ncclResult_t newBlock(size_t size, void** out) {  // mutex_ held
    int fd = memfd_create("gyre-fake-device", MFD_CLOEXEC);
    if (fd < 0) return fail(ncclSystemError, "fake CUDA: memfd_create failed: %s", strerror(errno));
    void* p = MAP_FAILED;
    if (ftruncate(fd, static_cast<off_t>(size)) == 0) p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return fail(ncclSystemError, "fake CUDA: cannot map %zu bytes of device memory: %s", size, strerror(err));
    }
    blocks_[p] = Block{fd, size, ++allocationSerial_};
    *out = p;
    return ncclSuccess;
  }
  static_assert(sizeof(FakeIpc) <= sizeof(IpcHandle));

  static thread_local int device_;
  char privateStreams_[kDevices] = {};  // their addresses name each device's private stream
  char nullStreams_[kDevices] = {};     // and its null stream
  const bool synchronous_;
  const int blockThreads_;  // host threads per emulated kernel block
  std::mutex mutex_;
  std::mutex callbackThread_;  // held while a host function runs: one at a time, as on CUDA's callback thread
  std::map<StreamHandle, std::unique_ptr<FakeStream>> streams_;
  std::map<void*, Allocation> allocations_;  // deviceAlloc'd, by base address
  std::map<void*, Block> blocks_;            // what they are carved from, by base address
  void* smallBlock_ = nullptr;               // the block new small allocations go to
  struct Opened {
    uint64_t size;
    int32_t pid;
    uint64_t serial;
  };
  std::map<void*, Opened> opened_;  // ipcOpenHandle'd, by base address
  std::map<const void*, size_t> hostAllocations_;  // allocHost'd (page-locked host memory)
};

thread_local int FakeRuntime::device_ = 0;

FakeRuntime* theFake();

}  // namespace

int fakeBeginCapture(cudaStream_t stream, FakeGraph* graph, int mode) {
  return theFake()->beginCapture(stream, graph, mode);
}
int fakeEndCapture(cudaStream_t stream) { return theFake()->endCapture(stream); }
int fakeLaunchGraph(const FakeGraph& graph, cudaStream_t stream) { return theFake()->launchGraph(graph, stream); }
const char* fakeCudaErrorName(int error) { return fakecuda::captureErrorName(error); }
void fakeBreakContext(const char* cudaErrorText) { theFake()->breakContext(cudaErrorText); }
int64_t fakeKernelLaunches() { return theFake()->kernelLaunches(); }
FakeHoldings fakeHoldings() { return theFake()->holdings(); }
int64_t fakeIpcOpens() { return theFake()->ipcOpens(); }
uint32_t fakeContextDevices() { return theFake()->contextDevices(); }
void fakeSetPeerAccessSupported(bool supported) { theFake()->setPeerAccessible(supported); }
void fakeSetPeerAtomicsSupported(bool supported) { theFake()->setPeerAtomics(supported); }
void fakeSetResidentBlocks(int slots) { theFake()->setResidentBlocks(slots); }
int fakeDeviceOf(const void* p) { return theFake()->deviceOf(p); }
bool fakeKernelTouch(const void* p) { return theFake()->kernelTouch(p); }

namespace {
FakeRuntimeOptions gOptions;  // set by the entry point before the first theFake()

FakeRuntime* theFake() {
  // Never destroyed: stream threads may still be finishing at exit.
  static FakeRuntime* runtime = new FakeRuntime(gOptions.synchronous != 0, gOptions.blockThreads);
  return runtime;
}
}  // namespace

// The failures of the fake are recorded by the library that loaded it, so
// ncclGetLastError and NCCL_DEBUG=WARN report them as the real runtime's.
ncclResult_t fail(ncclResult_t code, const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  return gOptions.recordFailure ? gOptions.recordFailure(code, text) : code;
}

}  // namespace gyre

// The one entry point the library looks up (runtime.h). The options of the
// first call stay: there is one fake per process.
extern "C" GYRE_FAKE_CUDA_API gyre::DeviceRuntime* gyreFakeCudaRuntime(const gyre::FakeRuntimeOptions* options) {
  if (!options || options->version != gyre::kFakeRuntimeVersion) return nullptr;
  static const bool once = [&] {
    gyre::gOptions = *options;
    return true;
  }();
  (void)once;
  return gyre::theFake();
}
