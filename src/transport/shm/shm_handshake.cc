#include "src/transport/shm/shm_handshake.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {
namespace {

constexpr char kHelloMagic[8] = {'G', 'Y', 'R', 'E', 'S', 'H', 'M', '1'};
constexpr int kSliceMs = 100;          // how often long waits look at the abort flag
constexpr int kHelloMs = 2000;         // a caller that connects but sends nothing is dropped after this
constexpr int kConnectRetryMs = 1;     // the receiver's listener usually appears within milliseconds

// A hello that arrived before the connectRecv call that wants it.
struct Pending {
  int sock = -1;
  int memfd = -1;
  ShmHello hello{};
};

struct Listener {
  int fd = -1;
  int users = 0;
  std::map<std::pair<int, int>, Pending> early;  // by (fromRank, channel)
};

// Listeners of every communicator rank in this process (several ranks may
// share a process: ncclCommInitAll, gyreCommInitAllHost). The mutex guards
// the map; a listener itself is used only by the thread of its rank.
std::mutex gMutex;
std::map<std::string, Listener> gListeners;

// The abstract socket name: a leading NUL byte, then text (not NUL-terminated).
std::string socketName(const ShmEndpoint& e) {
  char text[80];
  int n = snprintf(text, sizeof(text), "gyre-shm-%016llx-%d-%016llx", static_cast<unsigned long long>(e.secret),
                   e.rank, static_cast<unsigned long long>(e.addressHash));
  std::string name(1, '\0');
  name.append(text, static_cast<size_t>(n));
  return name;
}

socklen_t toSockaddr(const std::string& name, sockaddr_un* sa) {
  memset(sa, 0, sizeof(*sa));
  sa->sun_family = AF_UNIX;
  memcpy(sa->sun_path, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
}

void closePending(Pending& p) {
  if (p.sock >= 0) ::close(p.sock);
  if (p.memfd >= 0) ::close(p.memfd);
  p.sock = p.memfd = -1;
}

ncclResult_t waitOrGiveUp(int fd, short events, const Deadline& deadline, const std::atomic<bool>* abort,
                          const char* what, const char* waitingFor) {
  if (abort && abort->load(std::memory_order_relaxed))
    return fail(ncclInvalidUsage, "%s: aborted (ncclCommAbort) while %s", what, waitingFor);
  if (deadline.expired()) return fail(ncclRemoteError, "%s: timed out while %s", what, waitingFor);
  pollfd p{fd, events, 0};
  poll(&p, 1, deadline.remainingMs(kSliceMs));
  return ncclSuccess;
}

// Reads one hello and its descriptor from a freshly accepted caller.
bool readHello(int sock, Pending* out) {
  pollfd p{sock, POLLIN, 0};
  if (poll(&p, 1, kHelloMs) <= 0) return false;
  iovec iov{&out->hello, sizeof(out->hello)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); n >= 0 && c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
      memcpy(&out->memfd, CMSG_DATA(c), sizeof(int));
  return n == static_cast<ssize_t>(sizeof(out->hello)) && !(msg.msg_flags & MSG_CTRUNC) && out->memfd >= 0 &&
         memcmp(out->hello.magic, kHelloMagic, sizeof(kHelloMagic)) == 0;
}

}  // namespace

ncclResult_t shmAcquireListener(const ShmEndpoint& self) {
  const std::string name = socketName(self);
  std::lock_guard<std::mutex> lock(gMutex);
  Listener& l = gListeners[name];
  if (l.users++ > 0) return ncclSuccess;
  l.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un sa;
  socklen_t len = toSockaddr(name, &sa);
  if (l.fd < 0 || bind(l.fd, reinterpret_cast<sockaddr*>(&sa), len) != 0 || listen(l.fd, SOMAXCONN) != 0) {
    int e = errno;
    if (l.fd >= 0) ::close(l.fd);
    gListeners.erase(name);
    return fail(ncclSystemError, "rank %d: cannot listen on the shared-memory socket @%s (%s); set "
                "NCCL_SHM_DISABLE=1 to use sockets", self.rank, name.c_str() + 1, strerror(e));
  }
  return ncclSuccess;
}

void shmReleaseListener(const ShmEndpoint& self) {
  std::lock_guard<std::mutex> lock(gMutex);
  auto it = gListeners.find(socketName(self));
  if (it == gListeners.end() || --it->second.users > 0) return;
  ::close(it->second.fd);
  for (auto& [key, p] : it->second.early) closePending(p);
  gListeners.erase(it);
}

ncclResult_t shmSendSegment(const ShmEndpoint& to, int fromRank, int channel, size_t slotBytes, int memfd,
                            const Deadline& deadline, const std::atomic<bool>* abort, int* sock, const char* what) {
  sockaddr_un sa;
  socklen_t len = toSockaddr(socketName(to), &sa);
  int s = -1;
  for (;;) {
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return fail(ncclSystemError, "%s: socket() failed (%s)", what, strerror(errno));
    if (connect(s, reinterpret_cast<sockaddr*>(&sa), len) == 0) break;
    int e = errno;
    ::close(s);
    // Refused: the peer has not made its listener yet. EAGAIN: its backlog is full.
    if (e != ECONNREFUSED && e != ENOENT && e != EAGAIN && e != EINTR)
      return fail(ncclSystemError, "%s: cannot connect to rank %d's shared-memory socket (%s)", what, to.rank,
                  strerror(e));
    if (abort && abort->load(std::memory_order_relaxed))
      return fail(ncclInvalidUsage, "%s: aborted (ncclCommAbort) while connecting", what);
    if (deadline.expired())
      return fail(ncclRemoteError, "%s: rank %d never opened its shared-memory socket; it died, is stuck, runs with "
                  "NCCL_SHM_DISABLE=1 while this rank does not, or is in another network namespace (then set "
                  "NCCL_SHM_DISABLE=1 on every rank)", what, to.rank);
    poll(nullptr, 0, kConnectRetryMs);
  }
  ShmHello hello{};
  memcpy(hello.magic, kHelloMagic, sizeof(hello.magic));
  hello.secret = to.secret;
  hello.fromRank = fromRank;
  hello.channel = channel;
  hello.slotBytes = slotBytes;
  iovec iov{&hello, sizeof(hello)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &memfd, sizeof(int));
  // A fresh socket's buffer is empty, so this small message never blocks.
  // Once queued, the descriptor in flight keeps the segment alive even if
  // this process dies before the receiver takes it.
  if (sendmsg(s, &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(hello))) {
    int e = errno;
    ::close(s);
    return fail(ncclRemoteError, "%s: sending the segment to rank %d failed (%s)", what, to.rank, strerror(e));
  }
  *sock = s;
  return ncclSuccess;
}

ncclResult_t shmAcceptSegment(const ShmEndpoint& self, int fromRank, int channel, const Deadline& deadline,
                              const std::atomic<bool>* abort, ShmHello* hello, int* sock, int* memfd,
                              const char* what) {
  Listener* l;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    auto it = gListeners.find(socketName(self));
    if (it == gListeners.end()) return fail(ncclInternalError, "%s: no shared-memory listener", what);
    l = &it->second;  // map nodes are stable; only this rank's thread uses them
  }
  const auto key = std::make_pair(fromRank, channel);
  char waitingFor[96];
  snprintf(waitingFor, sizeof(waitingFor), "waiting for rank %d to connect over shared memory", fromRank);
  for (;;) {
    auto it = l->early.find(key);
    if (it != l->early.end()) {
      *hello = it->second.hello;
      *sock = it->second.sock;
      *memfd = it->second.memfd;
      l->early.erase(it);
      return ncclSuccess;
    }
    int s = accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (s < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
        return fail(ncclSystemError, "%s: accept failed (%s)", what, strerror(errno));
      GYRE_CHECK(waitOrGiveUp(l->fd, POLLIN, deadline, abort, what, waitingFor));
      continue;
    }
    Pending p;
    p.sock = s;
    if (!readHello(s, &p) || p.hello.secret != self.secret) {
      GYRE_WARN("rank %d: dropped a shared-memory connection that is not from this communicator", self.rank);
      closePending(p);
      continue;
    }
    Pending& slot = l->early[{p.hello.fromRank, p.hello.channel}];
    closePending(slot);  // a duplicate replaces a stale one
    slot = p;
  }
}

}  // namespace gyre
