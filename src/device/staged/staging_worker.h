// The thread that runs a communicator's staged pieces (staging.h). A piece
// waits on the host for its peers, so it must not run in a CUDA host
// function: CUDA may run every host function of a process on one thread,
// and ranks of one process, each with a job of its own, would wait there
// for each other forever. Instead the stream records an event once the
// piece's input is on the host, this thread polls the event, runs the
// piece, and then writes a flag in mapped host memory that the stream waits
// on (a stream memory operation) before copying the output back. The writer
// is a host thread, never another stream, so the wait cannot hold up the
// work it waits for.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "include/gyre.h"
#include "src/device/runtime/runtime.h"

namespace gyre {

class StagingWorker {
 public:
  // What the thread runs once `inputReady` completes, or calls `abandon`
  // with instead when it does not within `timeoutSeconds`.
  struct Piece {
    void (*run)(void*) = nullptr;
    void (*abandon)(void*, const char* why) = nullptr;
    void* arg = nullptr;
    EventHandle inputReady = nullptr;  // the worker destroys it
    double timeoutSeconds = 300;
  };

  StagingWorker() = default;
  ~StagingWorker() { stop(); }
  StagingWorker(const StagingWorker&) = delete;
  StagingWorker& operator=(const StagingWorker&) = delete;

  // Allocates the flag and starts the thread on `device`.
  ncclResult_t start(int device);
  bool started() const { return thread_.joinable(); }

  // Queues `piece`; `stream` then waits until the piece has run (or was abandoned).
  ncclResult_t enqueue(const Piece& piece, StreamHandle stream);

  // Lets queued pieces finish, then ends the thread and frees the flag.
  void stop();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<Piece, uint32_t>> queue_;
  bool stopping_ = false;
  uint32_t issued_ = 0;      // flag values handed to streams so far
  uint32_t* hostFlag_ = nullptr;
  uint32_t* deviceFlag_ = nullptr;
  int device_ = -1;
  std::thread thread_;
};

}  // namespace gyre
