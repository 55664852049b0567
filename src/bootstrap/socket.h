// A TCP socket that never blocks forever: every blocking operation takes a
// Deadline and an optional abort flag, and failures name what was being done.
// Once a handshake attaches a RecordChannel (secure/handshake.h), everything
// sent and received through these methods is encrypted and authenticated;
// code that moves bytes itself uses sendv/recvv, never the descriptor.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "include/gyre.h"
#include "src/bootstrap/net_address.h"
#include "src/bootstrap/secure/record_channel.h"
#include "src/debug/deadline.h"

namespace gyre {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_), channel_(std::move(o.channel_)) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Listens on `bindAddr` (port 0 picks a free port); *bound gets the real address.
  static ncclResult_t listenOn(const NetAddress& bindAddr, Socket* out, NetAddress* bound);
  // Connects, retrying refused connections until the deadline (the peer may not
  // be listening yet). With `refusedDeadline`, a connection still refused
  // (ECONNREFUSED: the host answered, nothing listens) after it fails at once
  // and sets *refused: for a peer that must already be listening.
  static ncclResult_t connectTo(const NetAddress& addr, const Deadline& deadline,
                                const std::atomic<bool>* abort, Socket* out, const char* what,
                                const Deadline* refusedDeadline = nullptr, bool* refused = nullptr);

  ncclResult_t acceptOne(Socket* out, NetAddress* from, const Deadline& deadline,
                         const std::atomic<bool>* abort, const char* what) const;
  ncclResult_t sendAll(const void* data, size_t bytes, const Deadline& deadline,
                       const std::atomic<bool>* abort, const char* what) const;
  ncclResult_t recvAll(void* data, size_t bytes, const Deadline& deadline,
                       const std::atomic<bool>* abort, const char* what) const;

  // Non-blocking transfer of up to `bytes`; *done gets how many moved (0 when the
  // socket would block). Returns ncclRemoteError if the peer closed.
  ncclResult_t trySend(const void* data, size_t bytes, size_t* done, const char* what) const;
  ncclResult_t tryRecv(void* data, size_t bytes, size_t* done, const char* what) const;

  // As non-blocking sendmsg/recvmsg (MSG_DONTWAIT, MSG_NOSIGNAL), through
  // the record layer when the socket is encrypted (record_channel.h: a send
  // that says EAGAIN must come back with the same bytes).
  ssize_t sendv(const iovec* iov, int iovcnt) const;
  ssize_t recvv(const iovec* iov, int iovcnt) const;
  // Why sendv/recvv failed with `err`: the record layer's reason for an
  // unauthentic or cut stream, else strerror.
  std::string errorText(int err) const;
  // Data already received and decrypted, or a whole record, that poll()
  // on the descriptor would not show: read it before sleeping.
  bool hasBufferedInput() const { return channel_ && channel_->hasBufferedInput(); }
  // Part of a sealed record still waiting to leave.
  bool hasPendingOutput() const { return channel_ && channel_->hasPendingOutput(); }

  void attachChannel(std::unique_ptr<RecordChannel> channel) { channel_ = std::move(channel); }
  // The record layer refused what arrived (or the handshake's answer): the
  // failure recorded says why, and no other reading of it applies.
  bool cipherFailed() const { return channel_ && !channel_->problem().empty(); }
  bool encrypted() const { return channel_ != nullptr; }

  // For poll() and socket options only: bytes go through sendv/recvv.
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
  std::unique_ptr<RecordChannel> channel_;  // null: the clear stream
};

// Waits until fd is readable/writable, the deadline passes or abort is set;
// wakes at least every 100 ms to look at the abort flag.
ncclResult_t pollFd(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abort,
                    const char* what);

}  // namespace gyre
