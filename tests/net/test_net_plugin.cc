// A small external net plugin for the tests: libnccl-net-gyretest.so exports
// ncclNet_v8 (and nothing newer), carries messages over plain loopback TCP
// ([4-byte size][bytes] per message, in order per comm) and counts its calls,
// so a test can prove gyre really moved the data through it
// (gyretest_counts()). TESTNET_FAIL_INIT=1 makes init() fail with a warning.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "transport/net/net_v8.h"

namespace {

std::atomic<long> gIsend{0}, gIrecv{0}, gTest{0}, gConnect{0}, gAccept{0}, gRegMr{0}, gDeregMr{0}, gOpen{0};
gyreNetLogger_t gLog = nullptr;

struct Request;
struct Comm {
  int fd = -1;
  bool isSend = false;
  std::deque<Request*> queue;  // requests in posting order; only the front moves
  bool broken = false;
};

struct Request {
  Comm* comm;
  char* data;
  uint32_t size;       // send: bytes to send; recv: capacity
  uint32_t header = 0;  // the size word, sent or received
  size_t headerDone = 0;
  size_t dataDone = 0;
  bool done = false;
};

struct Listen {
  int fd = -1;
};

void setNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Moves the front requests of `c` as far as the socket allows. False on a broken connection.
bool drive(Comm* c) {
  while (!c->queue.empty()) {
    Request* r = c->queue.front();
    while (r->headerDone < sizeof(r->header)) {
      ssize_t n = c->isSend ? send(c->fd, reinterpret_cast<char*>(&r->header) + r->headerDone,
                                   sizeof(r->header) - r->headerDone, MSG_NOSIGNAL)
                            : recv(c->fd, reinterpret_cast<char*>(&r->header) + r->headerDone,
                                   sizeof(r->header) - r->headerDone, 0);
      if (n == 0 && !c->isSend) return false;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      r->headerDone += static_cast<size_t>(n);
    }
    if (!c->isSend && r->header > r->size) {
      if (gLog) gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: message of %u bytes into a %u-byte buffer",
                     r->header, r->size);
      return false;
    }
    const size_t want = c->isSend ? r->size : r->header;
    while (r->dataDone < want) {
      ssize_t n = c->isSend ? send(c->fd, r->data + r->dataDone, want - r->dataDone, MSG_NOSIGNAL)
                            : recv(c->fd, r->data + r->dataDone, want - r->dataDone, 0);
      if (n == 0 && !c->isSend) return false;
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      r->dataDone += static_cast<size_t>(n);
    }
    r->done = true;
    c->queue.pop_front();
  }
  return true;
}

ncclResult_t init(gyreNetLogger_t log) {
  gLog = log;
  const char* f = getenv("TESTNET_FAIL_INIT");
  if (f && *f == '1') {
    if (gLog) gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: init refused (TESTNET_FAIL_INIT=1)");
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t devices(int* n) {
  *n = 2;
  return ncclSuccess;
}

ncclResult_t getProperties(int dev, gyreNetProperties_v8_t* p) {
  memset(p, 0, sizeof(*p));
  static char name[] = "gyretest0";
  p->name = name;
  p->ptrSupport = GYRE_NET_PTR_HOST;
  p->speed = 10000;
  p->port = dev;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  return ncclSuccess;
}

ncclResult_t listenFn(int, void* handle, void** listenComm) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (gLog) gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: listen failed: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return ncclSystemError;
  }
  setNonBlocking(fd);
  memset(handle, 0, GYRE_NET_HANDLE_MAXSIZE);
  memcpy(handle, &a, sizeof(a));
  auto* l = new Listen{fd};
  *listenComm = l;
  ++gOpen;
  return ncclSuccess;
}

Comm* newComm(int fd, bool isSend) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setNonBlocking(fd);
  auto* c = new Comm();
  c->fd = fd;
  c->isSend = isSend;
  ++gOpen;
  return c;
}

ncclResult_t connectFn(int, void* handle, void** sendComm, gyreNetDeviceHandle_v8_t**) {
  ++gConnect;
  sockaddr_in a{};
  memcpy(&a, handle, sizeof(a));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  // Loopback connects complete from the listen backlog, without the peer's accept().
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    if (gLog) gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: connect failed: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return ncclSystemError;
  }
  *sendComm = newComm(fd, true);
  return ncclSuccess;
}

ncclResult_t acceptFn(void* listenComm, void** recvComm, gyreNetDeviceHandle_v8_t**) {
  ++gAccept;
  auto* l = static_cast<Listen*>(listenComm);
  int fd = accept(l->fd, nullptr, nullptr);
  if (fd < 0) {
    *recvComm = nullptr;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ncclSuccess;
    if (gLog) gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: accept failed: %s", strerror(errno));
    return ncclSystemError;
  }
  *recvComm = newComm(fd, false);
  return ncclSuccess;
}

ncclResult_t regMr(void*, void*, size_t, int, void** mhandle) {
  ++gRegMr;
  *mhandle = reinterpret_cast<void*>(0x1);
  return ncclSuccess;
}

ncclResult_t regMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInternalError; }

ncclResult_t deregMr(void*, void*) {
  ++gDeregMr;
  return ncclSuccess;
}

ncclResult_t isend(void* sendComm, void* data, int size, int, void*, void** request) {
  ++gIsend;
  auto* c = static_cast<Comm*>(sendComm);
  auto* r = new Request{c, static_cast<char*>(data), static_cast<uint32_t>(size)};
  r->header = static_cast<uint32_t>(size);
  c->queue.push_back(r);
  *request = r;
  return ncclSuccess;
}

ncclResult_t irecv(void* recvComm, int n, void** data, int* sizes, int*, void**, void** request) {
  ++gIrecv;
  if (n != 1) return ncclInternalError;
  auto* c = static_cast<Comm*>(recvComm);
  auto* r = new Request{c, static_cast<char*>(data[0]), static_cast<uint32_t>(sizes[0])};
  c->queue.push_back(r);
  *request = r;
  return ncclSuccess;
}

ncclResult_t iflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* size) {
  ++gTest;
  auto* r = static_cast<Request*>(request);
  if (!r->done && !r->comm->broken && !drive(r->comm)) r->comm->broken = true;
  if (r->done) {
    *done = 1;
    if (size) *size = static_cast<int>(r->comm->isSend ? r->size : r->header);
    delete r;
    return ncclSuccess;
  }
  *done = 0;
  if (r->comm->broken) {
    if (gLog) gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: connection closed or broken");
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t closeComm(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  for (Request* r : c->queue) delete r;
  close(c->fd);
  delete c;
  --gOpen;
  return ncclSuccess;
}

ncclResult_t closeListen(void* listenComm) {
  auto* l = static_cast<Listen*>(listenComm);
  close(l->fd);
  delete l;
  --gOpen;
  return ncclSuccess;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) gyreNet_v8_t ncclNet_v8 = {
    "GyreTest", init, devices, getProperties, listenFn, connectFn, acceptFn, regMr, regMrDmaBuf, deregMr,
    isend, irecv, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr};

// For the tests: calls made so far, and comms and listeners still open.
__attribute__((visibility("default"))) void gyretest_counts(long* isends, long* irecvs, long* tests, long* open,
                                                            long* regs, long* deregs) {
  *isends = gIsend;
  *irecvs = gIrecv;
  *tests = gTest;
  *open = gOpen;
  *regs = gRegMr;
  *deregs = gDeregMr;
}

}
