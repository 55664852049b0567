#include "src/bootstrap/socket.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "src/debug/error.h"

namespace gyre {
namespace {

constexpr int kAbortCheckMs = 100;

void makeNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    channel_ = std::move(o.channel_);
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  channel_.reset();  // wipes its keys
}

ssize_t Socket::sendv(const iovec* iov, int iovcnt) const {
  if (channel_) return channel_->sendv(fd_, iov, iovcnt);
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  return ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t Socket::recvv(const iovec* iov, int iovcnt) const {
  if (channel_) return channel_->recvv(fd_, iov, iovcnt);
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  return ::recvmsg(fd_, &msg, MSG_DONTWAIT);
}

std::string Socket::errorText(int err) const {
  if (channel_ && (err == EBADMSG || err == EPROTO) && !channel_->problem().empty()) return channel_->problem();
  return strerror(err);
}

ncclResult_t pollFd(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abort,
                    const char* what) {
  for (;;) {
    if (abort && abort->load(std::memory_order_relaxed))
      return fail(ncclInvalidUsage, "%s: communicator was aborted", what);
    if (deadline.expired()) return fail(ncclSystemError, "%s: timed out", what);
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, deadline.remainingMs(kAbortCheckMs));
    if (rc > 0) return ncclSuccess;  // ready, or an error the next call will report
    if (rc < 0 && errno != EINTR) return fail(ncclSystemError, "%s: poll: %s", what, strerror(errno));
  }
}

ncclResult_t Socket::listenOn(const NetAddress& bindAddr, Socket* out, NetAddress* bound) {
  int fd = socket(bindAddr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(ncclSystemError, "socket(): %s", strerror(errno));
  Socket s(fd);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, bindAddr.sa(), bindAddr.length()) != 0)
    return fail(ncclSystemError, "cannot bind to %s: %s", bindAddr.toString().c_str(), strerror(errno));
  if (listen(fd, 1024) != 0)
    return fail(ncclSystemError, "cannot listen on %s: %s", bindAddr.toString().c_str(), strerror(errno));
  makeNonBlocking(fd);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  *bound = NetAddress(reinterpret_cast<sockaddr*>(&ss));
  *out = std::move(s);
  return ncclSuccess;
}

ncclResult_t Socket::connectTo(const NetAddress& addr, const Deadline& deadline,
                               const std::atomic<bool>* abort, Socket* out, const char* what,
                               const Deadline* refusedDeadline, bool* refused) {
  int backoffMs = 1;
  for (;;) {
    int fd = socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return fail(ncclSystemError, "%s: socket(): %s", what, strerror(errno));
    Socket s(fd);
    int rc = ::connect(fd, addr.sa(), addr.length());
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      GYRE_CHECK(pollFd(fd, POLLOUT, deadline, abort, what));
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      setNoDelay(fd);
      *out = std::move(s);
      return ncclSuccess;
    }
    // Refused or unreachable: the listener may simply not exist yet.
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH && err != ENETUNREACH)
      return fail(ncclSystemError, "%s: connect to %s: %s", what, addr.toString().c_str(), strerror(err));
    if (abort && abort->load()) return fail(ncclInvalidUsage, "%s: communicator was aborted", what);
    if (err == ECONNREFUSED && refusedDeadline && refusedDeadline->expired()) {
      if (refused) *refused = true;
      return fail(ncclSystemError, "%s: %s refused the connection (nothing listens there)", what,
                  addr.toString().c_str());
    }
    if (deadline.expired())
      return fail(ncclSystemError, "%s: nothing accepted connections at %s before the timeout (%s)", what,
                  addr.toString().c_str(), strerror(err));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoffMs, deadline.remainingMs())));
    backoffMs = std::min(backoffMs * 2, 100);
  }
}

ncclResult_t Socket::acceptOne(Socket* out, NetAddress* from, const Deadline& deadline,
                               const std::atomic<bool>* abort, const char* what) const {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      setNoDelay(fd);
      *out = Socket(fd);
      if (from) *from = NetAddress(reinterpret_cast<sockaddr*>(&ss));
      return ncclSuccess;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return fail(ncclSystemError, "%s: accept: %s", what, strerror(errno));
    GYRE_CHECK(pollFd(fd_, POLLIN, deadline, abort, what));
  }
}

ncclResult_t Socket::trySend(const void* data, size_t bytes, size_t* done, const char* what) const {
  *done = 0;
  if (bytes == 0) return ncclSuccess;
  const iovec v{const_cast<void*>(data), bytes};
  ssize_t n = sendv(&v, 1);
  if (n >= 0) {
    *done = static_cast<size_t>(n);
    return ncclSuccess;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
  return fail(ncclRemoteError, "%s: connection lost (%s)", what, errorText(errno).c_str());
}

ncclResult_t Socket::tryRecv(void* data, size_t bytes, size_t* done, const char* what) const {
  *done = 0;
  if (bytes == 0) return ncclSuccess;
  const iovec v{data, bytes};
  ssize_t n = recvv(&v, 1);
  if (n > 0) {
    *done = static_cast<size_t>(n);
    return ncclSuccess;
  }
  if (n == 0) return fail(ncclRemoteError, "%s: connection closed by the peer", what);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ncclSuccess;
  if (errno == EBADMSG || errno == EPROTO) return fail(ncclRemoteError, "%s: %s", what, errorText(errno).c_str());
  return fail(ncclRemoteError, "%s: connection lost (%s)", what, strerror(errno));
}

ncclResult_t Socket::sendAll(const void* data, size_t bytes, const Deadline& deadline,
                             const std::atomic<bool>* abort, const char* what) const {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    size_t n = 0;
    GYRE_CHECK(trySend(p, bytes, &n, what));
    p += n;
    bytes -= n;
    if (bytes > 0 && n == 0) GYRE_CHECK(pollFd(fd_, POLLOUT, deadline, abort, what));
  }
  return ncclSuccess;
}

ncclResult_t Socket::recvAll(void* data, size_t bytes, const Deadline& deadline,
                             const std::atomic<bool>* abort, const char* what) const {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    size_t n = 0;
    GYRE_CHECK(tryRecv(p, bytes, &n, what));
    p += n;
    bytes -= n;
    if (bytes > 0 && n == 0 && !hasBufferedInput()) GYRE_CHECK(pollFd(fd_, POLLIN, deadline, abort, what));
  }
  return ncclSuccess;
}

}  // namespace gyre
