#include "src/transport/socket/socket_data_path.h"

#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "src/topology/affinity.h"

namespace gyre::socket_detail {

DataPath::~DataPath() {
  stop_.store(true, std::memory_order_release);
  for (int fd : wake_) poke(fd);
  for (std::thread& t : threads_) t.join();
  for (int fd : wake_) ::close(fd);
  if (doneEvent_ >= 0) ::close(doneEvent_);
  if (epoll_ >= 0) ::close(epoll_);
}

ncclResult_t DataPath::init(int controlFd) {
  controlFd_ = controlFd;
  doneEvent_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  if (doneEvent_ < 0 || epoll_ < 0) return fail(ncclSystemError, "%s: eventfd/epoll: %s", what_.c_str(), strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = doneEvent_;
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, doneEvent_, &ev) != 0)
    return fail(ncclSystemError, "%s: epoll_ctl: %s", what_.c_str(), strerror(errno));
  for (int t = 0; t < nthreads_; ++t) {
    int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) return fail(ncclSystemError, "%s: eventfd: %s", what_.c_str(), strerror(errno));
    wake_.push_back(fd);
  }
  return ncclSuccess;
}

ncclResult_t DataPath::post(uint32_t bytes, char* payload, uint64_t* job) {
  if (threads_.empty()) GYRE_CHECK(startHelpers());
  const uint64_t j = posted_.load(std::memory_order_relaxed);
  jobs_[j % kFifoSlots] = {payload, bytes};
  remaining_[j % kFifoSlots].store(sockets(), std::memory_order_relaxed);
  posted_.store(j + 1, std::memory_order_release);
  for (int fd : wake_) poke(fd);
  *job = j;
  return ncclSuccess;
}

ncclResult_t DataPath::check(int* culprit) {
  if (failed_.load(std::memory_order_acquire)) {
    *culprit = errorCulprit_;
    return fail(errorCode_, "%s", error_.c_str());
  }
  if (signaled_.exchange(false, std::memory_order_acq_rel)) {
    uint64_t v;
    (void)!::read(doneEvent_, &v, sizeof(v));
  }
  return ncclSuccess;
}

int DataPath::pollFd(short controlEvents) {
  if (controlEvents != controlEvents_) {
    epoll_event ev{};
    ev.events = (controlEvents & POLLIN ? uint32_t{EPOLLIN} : 0u) | (controlEvents & POLLOUT ? uint32_t{EPOLLOUT} : 0u);
    ev.data.fd = controlFd_;
    // Removed rather than registered with no events: epoll would still
    // report a hang-up, and a closed control socket would wake us forever.
    int op = controlEvents_ == 0 ? EPOLL_CTL_ADD : controlEvents == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
    if (epoll_ctl(epoll_, op, controlFd_, &ev) == 0) controlEvents_ = controlEvents;
  }
  return epoll_;
}

ncclResult_t DataPath::startHelpers() {
  try {
    for (int t = 0; t < nthreads_; ++t)
      threads_.emplace_back([this, t] {
        topo::bindThreadToNuma(helperNuma_);  // honours NCCL_IGNORE_CPU_AFFINITY
        run(t);
      });
  } catch (const std::system_error& e) {
    stop_.store(true);
    for (int fd : wake_) poke(fd);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    return fail(ncclSystemError, "%s: cannot start socket helper threads (NCCL_SOCKET_NTHREADS): %s",
                what_.c_str(), e.what());
  }
  return ncclSuccess;
}

void DataPath::run(int t) {
  pthread_setname_np(pthread_self(), "gyre-sockhelp");
  const int first = t * nsocks_;
  std::vector<pollfd> fds(static_cast<size_t>(nsocks_) + 1);
  while (!stop_.load(std::memory_order_acquire)) {
    bool moved = false;
    size_t npoll = 1;
    fds[0] = {wake_[static_cast<size_t>(t)], POLLIN, 0};
    for (int k = first; k < first + nsocks_; ++k) {
      bool blocked = false;
      if (!movePieces(k, &moved, &blocked)) return;
      if (blocked) fds[npoll++] = {socks_[static_cast<size_t>(k)].fd(), static_cast<short>(isSend_ ? POLLOUT : POLLIN), 0};
    }
    if (moved) continue;
    // A job posted after movePieces looked has poked wake_[t]: no lost wake-up.
    if (poll(fds.data(), npoll, kHelperPollMs) > 0 && (fds[0].revents & POLLIN)) {
      uint64_t v;
      (void)!::read(fds[0].fd, &v, sizeof(v));
    }
  }
}

bool DataPath::movePieces(int k, bool* moved, bool* blocked) {
  const size_t ks = static_cast<size_t>(k);
  constexpr size_t kHeader = sizeof(PieceHeader);
  for (;;) {
    const uint64_t j = done_[ks];
    if (j >= posted_.load(std::memory_order_acquire)) return true;
    const Job job = jobs_[j % kFifoSlots];
    size_t off, len;
    pieceRange(job.bytes, sockets(), k, &off, &len);
    const PieceHeader want{static_cast<uint32_t>(j), job.bytes, static_cast<uint32_t>(off), static_cast<uint32_t>(len)};
    if (isSend_ && partial_[ks] == 0) header_[ks] = want;
    char* base = job.payload + off;
    // The header and the piece in one system call: the header's rest (if
    // any) into or out of header_, then the piece's rest. A receiver may
    // read piece bytes before it checks the header they follow; they land
    // within this piece's own place, and a header that lies fails the step.
    while (partial_[ks] < kHeader + len) {
      const size_t was = partial_[ks];
      iovec iov[2];
      int iovcnt = 0;
      if (was < kHeader) iov[iovcnt++] = {reinterpret_cast<char*>(&header_[ks]) + was, kHeader - was};
      const size_t pieceDone = was > kHeader ? was - kHeader : 0;
      if (len > pieceDone) iov[iovcnt++] = {base + pieceDone, len - pieceDone};
      // Through the record layer when encrypted; it says EAGAIN only when
      // it holds nothing more for us, so polling the descriptor then is safe.
      const Socket& sock = socks_[ks];
      ssize_t n = isSend_ ? sock.sendv(iov, iovcnt) : sock.recvv(iov, iovcnt);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        *blocked = true;
        return true;
      }
      if (n <= 0) {
        if (n < 0 && (errno == EBADMSG || errno == EPROTO)) {
          recordCipherFailure(k, socks_[ks].errorText(errno));
          return false;
        }
        recordError(k, n == 0 ? 0 : errno, base + pieceDone, len - pieceDone);
        return false;
      }
      partial_[ks] += static_cast<size_t>(n);
      *moved = true;
      if (!isSend_ && was < kHeader && partial_[ks] >= kHeader && !(header_[ks] == want)) {
        recordForeignPiece(k, header_[ks], want);
        return false;
      }
    }
    partial_[ks] = 0;
    done_[ks] = j + 1;
    // The slot's bytes are published by this release; the executor's
    // acquire in jobDone() precedes its release of the FIFO counter.
    if (remaining_[j % kFifoSlots].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      poke(doneEvent_);
      signaled_.store(true, std::memory_order_release);
    }
  }
}

void DataPath::recordError(int k, int err, const char* at, size_t bytes) {
  char text[512];
  // EFAULT: the payload's user buffer (PayloadPointers) is not this
  // process's memory; the same words as the control socket's report.
  const bool badBuffer = err == EFAULT;
  if (err == 0)
    snprintf(text, sizeof(text), "%s, data socket %d: rank %d closed the connection in the middle of a message "
             "(the process died or aborted)", what_.c_str(), k, peer_);
  else if (badBuffer)
    snprintf(text, sizeof(text), "%s, data socket %d: the %s buffer at %p (%zu bytes of this piece) is not %s memory "
             "of this process (freed or unmapped during the call?)", what_.c_str(), k, isSend_ ? "send" : "receive",
             static_cast<const void*>(at), bytes, isSend_ ? "readable" : "writable");
  else
    snprintf(text, sizeof(text), "%s, data socket %d: connection lost (%s): rank %d died or aborted", what_.c_str(),
             k, strerror(err), peer_);
  recordFailure(text, badBuffer ? ncclInvalidArgument : ncclRemoteError, badBuffer ? rank_ : peer_);
}

void DataPath::recordCipherFailure(int k, const std::string& why) {
  char text[512];
  snprintf(text, sizeof(text), "%s, data socket %d: %s", what_.c_str(), k, why.c_str());
  recordFailure(text, ncclRemoteError, peer_);
}

void DataPath::recordForeignPiece(int k, const PieceHeader& got, const PieceHeader& want) {
  char text[512];
  snprintf(text, sizeof(text), "%s, data socket %d: rank %d sent a piece of %u bytes at offset %u of a %u-byte payload "
           "(piece job %u) where this rank expects %u bytes at offset %u of a %u-byte payload (job %u): its pieces do "
           "not match the step headers it sent", what_.c_str(), k, peer_, got.bytes, got.offset, got.stepBytes,
           got.job, want.bytes, want.offset, want.stepBytes, want.job);
  recordFailure(text, ncclRemoteError, peer_);
}

void DataPath::recordFailure(const char* text, ncclResult_t code, int culprit) {
  {
    std::lock_guard<std::mutex> lock(errorMu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    error_ = text;
    errorCode_ = code;
    errorCulprit_ = culprit;
    failed_.store(true, std::memory_order_release);
  }
  poke(doneEvent_);
  signaled_.store(true, std::memory_order_release);
}

}  // namespace gyre::socket_detail
