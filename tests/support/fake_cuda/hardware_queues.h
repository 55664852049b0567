// A fake device's hardware work queues, as a driver has them: a fixed
// number per device (CUDA_DEVICE_MAX_CONNECTIONS, default 8, 1..32), each
// stream assigned one round-robin in creation order. A queue takes its
// commands in order, whatever stream they came from:
// - a wait (cuStreamWaitValue32, cudaStreamWaitEvent) runs at the queue's
//   head, so until it is satisfied no command of any stream behind it starts;
// - other work (kernels, copies, host functions, event records) starts and
//   leaves the head, running beside later commands of other streams; but a
//   command whose stream still runs its previous one waits at the head, so a
//   spinning kernel holds every stream queued behind its stream's next
//   command.
// A kernel also needs its blocks resident: it starts only when the device
// has that many of its resident-block slots free, and holds the head until
// then.
//
// Each queue has a host thread only while it has commands, and each started
// command a thread of its own while it runs, so an idle fake holds no
// threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "tests/support/fake_cuda/fake_cuda.h"

namespace gyre {

// What one stream has queued and not finished.
class StreamOrder {
 public:
  void queued();
  void finished();
  // Until this stream's previous command has finished.
  void awaitPreviousFinished();
  void markStarted();
  // Until every queued command has finished.
  void synchronize();
  bool idle();
  // Commands queued so far; and until the first `count` have finished or
  // `until` passes (false then), as cudaFree waits for work issued before it.
  uint64_t queuedSoFar();
  bool awaitFinished(uint64_t count, std::chrono::steady_clock::time_point until);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int pending_ = 0;       // queued or running
  bool running_ = false;  // a started command has not finished
  uint64_t queuedTotal_ = 0, finishedTotal_ = 0;  // commands finish in queue order
};

enum class CommandKind {
  kAtHead,  // runs at the queue's head: waits, and the instant event records and flag writes
  kStarted, // starts and leaves the head: kernels, copies, host functions
};

// Resident-block slots of one device.
class ResidentBlocks {
 public:
  explicit ResidentBlocks(int slots) : free_(slots), total_(slots) {}
  // Until `blocks` slots (at most all of them) are free; takes them.
  int acquire(int blocks);
  void release(int taken);

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  int free_;
  const int total_;
};

class HardwareQueue {
 public:
  // `blocks` > 0: a kernel of that many blocks (ResidentBlocks).
  void submit(std::shared_ptr<StreamOrder> stream, CommandKind kind, std::function<void()> op, int blocks,
              ResidentBlocks* residency);

 private:
  struct Command {
    std::shared_ptr<StreamOrder> stream;
    CommandKind kind;
    std::function<void()> op;
    int blocks;
    ResidentBlocks* residency;
  };
  void drain();

  std::mutex mutex_;
  std::deque<Command> commands_;
  bool draining_ = false;
};

// CUDA_DEVICE_MAX_CONNECTIONS as the driver reads it (default 8, 1..32).
int hardwareQueuesPerDevice();

// What tests may call: the resident-block slots of devices whose first
// stream is made after this call (default 528).
GYRE_FAKE_CUDA_API void fakeSetResidentBlocks(int slots);

}  // namespace gyre
