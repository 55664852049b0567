// The data sockets of one socket connection and the helper threads that drive
// them (NCCL_SOCKET_NTHREADS threads, NCCL_NSOCKS_PERTHREAD sockets each).
//
// The executor posts one job per large slot (socket_pieces.h); every helper
// then moves its sockets' pieces of that slot between the FIFO and the socket
// with non-blocking sendmsg/recvmsg, so several cores copy at once. Each data
// socket carries its pieces in job order and both sides post jobs in step
// order; every piece goes behind a PieceHeader (socket_pieces.h) that the
// receiving helper checks against its own cut, so a peer that sends more,
// fewer or other bytes than its step header announced is named instead of
// shifting the later pieces on that socket. The last helper to finish a job signals an
// eventfd that the executor's poll() watches (through an epoll set that also
// holds the control socket, since a connection offers poll() one descriptor).
//
// Helpers never block: they poll their sockets and a wake-up eventfd in slices
// of kHelperPollMs, and stop when the connection closes. They learn nothing of
// deadlines; the executor that waits on them owns those. A helper that fails
// records why and exits; the executor reports it on its next progress().
#pragma once

#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "src/bootstrap/socket.h"
#include "src/debug/error.h"
#include "src/transport/fifo.h"
#include "src/transport/socket/socket_pieces.h"

namespace gyre::socket_detail {

// Also bounds how late a helper notices close() if its wake-up were lost.
constexpr int kHelperPollMs = 100;

class DataPath {
 public:
  // `rank`: this rank, blamed when a payload's user buffer is not this
  // process's memory; `peer` is blamed for anything else.
  DataPath(bool isSend, int nthreads, int nsocks, std::string what, int rank, int peer, int helperNuma)
      : isSend_(isSend), nthreads_(nthreads), nsocks_(nsocks), what_(std::move(what)), rank_(rank), peer_(peer),
        helperNuma_(helperNuma),
        socks_(static_cast<size_t>(nthreads * nsocks)), done_(socks_.size(), 0), partial_(socks_.size(), 0),
        header_(socks_.size()) {}
  DataPath(const DataPath&) = delete;
  DataPath& operator=(const DataPath&) = delete;

  ~DataPath();

  int sockets() const { return static_cast<int>(socks_.size()); }
  Socket& socket(int i) { return socks_[static_cast<size_t>(i)]; }

  // After the sockets are connected.
  ncclResult_t init(int controlFd);

  // Hands the next step's payload to the helpers; *job gets its number.
  // `payload` is where its bytes are (send) or go (recv): the step's slot, or
  // a user buffer (PayloadPointers). Helpers start on the first job:
  // connections that only ever carry small payloads (tree connections, for
  // one) then cost no threads.
  ncclResult_t post(uint32_t bytes, char* payload, uint64_t* job);

  // Whether every piece of job `j` has moved. At most kFifoSlots jobs are ever
  // unretired (each holds a FIFO slot), so the job ring is never overrun.
  bool jobDone(uint64_t j) const { return remaining_[j % kFifoSlots].load(std::memory_order_acquire) == 0; }

  // Called at the start of each progress(): consumes the helpers' wake-up so a
  // later poll() sleeps again, and reports a helper's failure: a lost
  // connection (the peer is the culprit) or a payload buffer the kernel
  // could not read or write (EFAULT: this rank's bad buffer, ncclInvalidArgument).
  ncclResult_t check(int* culprit);

  // The descriptor the executor polls (POLLIN): ready when a job finishes, or
  // when the control socket has `controlEvents` (0: do not watch it).
  int pollFd(short controlEvents);

 private:
  struct Job {
    char* payload;
    uint32_t bytes;
  };

  static void poke(int fd) {
    uint64_t one = 1;
    (void)!::write(fd, &one, sizeof(one));
  }

  ncclResult_t startHelpers();

  void run(int t);

  // Moves socket k's pieces of every posted job it can without blocking.
  // False after a failure (recorded for the executor).
  bool movePieces(int k, bool* moved, bool* blocked);

  // `err` 0: the peer closed the socket in the middle of a piece; else the
  // errno of the failed send/recv of `bytes` at `at`.
  void recordError(int k, int err, const char* at, size_t bytes);
  // Socket k's encrypted stream failed (authentication failed, or cut).
  void recordCipherFailure(int k, const std::string& why);
  // The peer's header of a piece on socket k is not the piece this rank expects.
  void recordForeignPiece(int k, const PieceHeader& got, const PieceHeader& want);
  // Keeps the first failure for the executor and wakes it.
  void recordFailure(const char* text, ncclResult_t code, int culprit);

  const bool isSend_;
  const int nthreads_, nsocks_;
  const std::string what_;
  const int rank_;
  const int peer_;
  const int helperNuma_;
  std::vector<Socket> socks_;
  int controlFd_ = -1;
  short controlEvents_ = 0;  // what the epoll set watches on the control socket

  Job jobs_[kFifoSlots]{};
  std::atomic<int> remaining_[kFifoSlots]{};  // per job: sockets still moving their piece
  std::atomic<uint64_t> posted_{0};           // jobs posted by the executor
  std::vector<uint64_t> done_;                // per socket, helper-owned: jobs finished
  std::vector<size_t> partial_;               // per socket, helper-owned: bytes of the current header and piece moved
  std::vector<PieceHeader> header_;           // per socket, helper-owned: the current piece's header (sent or received)

  int doneEvent_ = -1;  // helpers -> executor
  int epoll_ = -1;      // doneEvent_ and, when wanted, the control socket
  std::atomic<bool> signaled_{false};
  std::vector<int> wake_;  // executor -> helper t
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};

  std::mutex errorMu_;
  std::string error_;  // the first helper failure, written once before failed_
  ncclResult_t errorCode_ = ncclRemoteError;  // with error_
  int errorCulprit_ = -1;                     // with error_
  std::atomic<bool> failed_{false};
};

}  // namespace gyre::socket_detail
