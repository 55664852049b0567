// A small external net plugin for the tests: carries messages over plain
// loopback TCP ([4-byte size][bytes] per message, in order per comm) and
// counts its calls, so a test can prove gyre really moved the data through it
// (gyretest_counts()). TESTNET_FAIL_INIT=1 makes init() fail with a warning.
//
// Built several times (tests/net/meson.build), each exporting, under NCCL's
// symbol names (ncclNetPlugin_vN), the tables its GYRETEST_V8 ... V12 macros
// name, over the same functions: libnccl-net-gyretest.so (v8 to v12, as
// real plugins export them), -gyretest10 (v8 to v10), -gyretest9 (v8, v9),
// -gyretest8 (v8) and -gyretest13 (only ncclNetPlugin_v13, a version gyre
// does not know). gyretest_version() says whose init() gyre called; the
// v10+ entry points record what those versions add (the profiler callback,
// the traffic class, the context init() returns).
//
// Like real plugins (aws-ofi-nccl warns "inflight requests" and
// "not released"), closeSend/closeRecv refuse a comm that still owns
// requests, i.e. ones posted and not yet reported done by test():
// gyretest_inflight_at_close() counts them.
//
// Faults, for the tests: TESTNET_FAIL_INIT=1 makes init() fail with a
// warning; TESTNET_FAIL_SENDS_AFTER=N makes test() fail every send request
// after the process's first N completed sends (an error mid-transfer);
// TESTNET_STALL_SENDS_AFTER=N leaves every send posted after the first N
// pending for ever (a request the network never completes);
// TESTNET_NULL_FUNCTION=NAME exports every table with NAME (isend, test,
// regMr, ...) null.
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
#include <vector>

#include "src/transport/net/net_v11.h"

namespace {

std::atomic<int> gVersion{0};  // the version whose init() was called
std::atomic<int> gSawProfiler{0}, gTrafficClass{-100};
std::atomic<long> gInflightAtClose{0}, gContextErrors{0};
std::atomic<long> gIsend{0}, gIrecv{0}, gTest{0}, gConnect{0}, gAccept{0}, gRegMr{0}, gDeregMr{0}, gOpen{0};
std::atomic<long> gSendsDone{0};
gyreNetLogger_t gLog = nullptr;

long faultAfter(const char* var) {
  const char* v = getenv(var);
  return v && *v ? strtol(v, nullptr, 10) : -1;
}
const long gFailSendsAfter = faultAfter("TESTNET_FAIL_SENDS_AFTER");
const long gStallSendsAfter = faultAfter("TESTNET_STALL_SENDS_AFTER");

struct Request;
struct Comm {
  int fd = -1;
  bool isSend = false;
  std::deque<Request*> queue;  // requests in posting order; only the front moves
  std::vector<Request*> stalled;  // TESTNET_STALL_SENDS_AFTER's sends, freed at close
  bool broken = false;
  long owned = 0;  // requests handed out and not yet reported done
};

struct Request {
  Comm* comm;
  char* data;
  uint32_t size;       // send: bytes to send; recv: capacity
  uint32_t header = 0;  // the size word, sent or received
  size_t headerDone = 0;
  size_t dataDone = 0;
  bool done = false;
  bool failed = false;  // reported failed by test(): no longer owned by the caller
  bool stalled = false;  // TESTNET_STALL_SENDS_AFTER: never moves
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
  if (gLog) gLog(kNetLogTrace, 0, __FILE__, __LINE__, "gyretest: init traced");
  if (!gVersion) gVersion = 8;
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

template <typename Props>
ncclResult_t getProperties(int dev, Props* p) {
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

ncclResult_t isend(void* sendComm, void* data, size_t size, int, void*, void** request) {
  ++gIsend;
  if (size > UINT32_MAX) return ncclInternalError;
  auto* c = static_cast<Comm*>(sendComm);
  auto* r = new Request{c, static_cast<char*>(data), static_cast<uint32_t>(size)};
  r->header = static_cast<uint32_t>(size);
  r->stalled = gStallSendsAfter >= 0 && gIsend > gStallSendsAfter;
  if (r->stalled) {  // kept out of the queue, so the sends behind it still move
    c->stalled.push_back(r);
    ++c->owned;
    *request = r;
    return ncclSuccess;
  }
  c->queue.push_back(r);
  ++c->owned;
  *request = r;
  return ncclSuccess;
}

ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int*, void**, void** request) {
  ++gIrecv;
  if (n != 1) return ncclInternalError;
  auto* c = static_cast<Comm*>(recvComm);
  auto* r = new Request{c, static_cast<char*>(data[0]), static_cast<uint32_t>(sizes[0])};
  c->queue.push_back(r);
  ++c->owned;
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
  if (r->stalled) {
    *done = 0;
    return ncclSuccess;
  }
  if (r->comm->isSend && gFailSendsAfter >= 0 && gSendsDone >= gFailSendsAfter) {
    if (gLog) gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: send failed (TESTNET_FAIL_SENDS_AFTER=%ld)",
                   gFailSendsAfter);
    if (!r->failed) --r->comm->owned;
    r->failed = true;
    *done = 0;
    return ncclSystemError;
  }
  if (!r->done && !r->comm->broken && !drive(r->comm)) r->comm->broken = true;
  if (r->done) {
    if (r->comm->isSend) ++gSendsDone;
    *done = 1;
    if (size) *size = static_cast<int>(r->comm->isSend ? r->size : r->header);
    --r->comm->owned;
    delete r;
    return ncclSuccess;
  }
  *done = 0;
  if (r->comm->broken) {
    if (gLog) gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: connection closed or broken");
    // The request has ended with the connection: the caller owns it no more,
    // but may test it again (and get the same error); closeComm frees it.
    if (!r->failed) --r->comm->owned;
    r->failed = true;
    return ncclRemoteError;  // the peer's doing, as NCCL's own networks report a closed connection
  }
  return ncclSuccess;
}

ncclResult_t closeComm(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  const long owned = c->owned;
  if (owned != 0 && gLog)
    gLog(kNetLogWarn, 0, __FILE__, __LINE__, "gyretest: %s with %ld request(s) in flight",
         c->isSend ? "closeSend" : "closeRecv", owned);
  gInflightAtClose += owned;
  for (Request* r : c->queue) delete r;
  for (Request* r : c->stalled) delete r;
  close(c->fd);
  delete c;
  --gOpen;
  return owned == 0 ? ncclSuccess : ncclInternalError;
}

ncclResult_t closeListen(void* listenComm) {
  auto* l = static_cast<Listen*>(listenComm);
  close(l->fd);
  delete l;
  --gOpen;
  return ncclSuccess;
}

// The entry points whose signature differs between versions.
[[maybe_unused]] ncclResult_t isendV8(void* comm, void* data, int size, int tag, void* mh, void** request) {
  return isend(comm, data, static_cast<size_t>(size), tag, mh, request);
}

[[maybe_unused]] ncclResult_t irecvV8(void* comm, int n, void** data, int* sizes, int* tags, void** mhs, void** request) {
  if (n != 1) return ncclInternalError;
  size_t size = static_cast<size_t>(sizes[0]);
  return irecv(comm, n, data, &size, tags, mhs, request);
}

[[maybe_unused]] ncclResult_t initV9(gyreNetLogger_t log) {
  gVersion = 9;
  return init(log);
}

[[maybe_unused]] ncclResult_t makeVDevice(int*, gyreNetVDeviceProps_v9_t*) { return ncclInternalError; }

[[maybe_unused]] ncclResult_t initV10(gyreNetLogger_t log, gyreNetProfilerCallback_t prof) {
  gVersion = 10;
  gSawProfiler = prof != nullptr;
  return init(log);
}

[[maybe_unused]] ncclResult_t connectV10(int dev, gyreNetCommConfig_v10_t* config, void* handle, void** sendComm,
                        gyreNetDeviceHandle_v10_t** devComm) {
  gTrafficClass = config ? config->trafficClass : -200;
  return connectFn(dev, handle, sendComm, devComm);
}

[[maybe_unused]] ncclResult_t isendV10(void* comm, void* data, size_t size, int tag, void* mh, void*, void** request) {
  return isend(comm, data, size, tag, mh, request);
}

[[maybe_unused]] ncclResult_t irecvV10(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhs, void**,
                      void** request) {
  return irecv(comm, n, data, sizes, tags, mhs, request);
}

// v11 and later: init() makes a context that listen() and connect() get back.
char gContext;

template <int Version>
[[maybe_unused]] ncclResult_t initV11(void** ctx, uint64_t, gyreNetCommConfig_v11_t* config, gyreNetLogger_t log,
                                      gyreNetProfilerCallback_t prof) {
  gVersion = Version;
  gSawProfiler = prof != nullptr;
  gTrafficClass = config ? config->trafficClass : -200;
  *ctx = &gContext;
  return init(log);
}

[[maybe_unused]] ncclResult_t listenV11(void* ctx, int dev, void* handle, void** listenComm) {
  if (ctx != &gContext) ++gContextErrors;
  return listenFn(dev, handle, listenComm);
}

[[maybe_unused]] ncclResult_t connectV11(void* ctx, int dev, void* handle, void** sendComm,
                                         gyreNetDeviceHandle_v10_t** devComm) {
  if (ctx != &gContext) ++gContextErrors;
  return connectFn(dev, handle, sendComm, devComm);
}

template <typename Props>
[[maybe_unused]] ncclResult_t propertiesV11(int dev, Props* p) {
  getProperties(dev, p);
  const char* limit = getenv("TESTNET_MAX_P2P");  // to test that gyre honours the limit
  p->maxP2pBytes = limit ? strtoull(limit, nullptr, 10) : size_t{1} << 30;
  p->maxCollBytes = size_t{1} << 30;
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}

[[maybe_unused]] ncclResult_t makeVDeviceV11(int*, gyreNetVDeviceProps_v11_t*) { return ncclInternalError; }
[[maybe_unused]] ncclResult_t makeVDeviceV12(int*, gyreNetVDeviceProps_v12_t*) { return ncclInternalError; }
[[maybe_unused]] ncclResult_t finalizeV11(void*) { return ncclSuccess; }
[[maybe_unused]] ncclResult_t setNetAttrV11(void*, gyreNetAttr_v11_t*) { return ncclSuccess; }

// TESTNET_NULL_FUNCTION=NAME: every exported table leaves NAME null, before
// gyre can look at it.
template <typename Table>
[[maybe_unused]] void nullFunction(Table* t, const char* name) {
  if (!strcmp(name, "isend")) t->isend = nullptr;
  if (!strcmp(name, "irecv")) t->irecv = nullptr;
  if (!strcmp(name, "test")) t->test = nullptr;
  if (!strcmp(name, "regMr")) t->regMr = nullptr;
  if (!strcmp(name, "closeListen")) t->closeListen = nullptr;
}

}  // namespace

extern "C" {

#define GYRETEST_EXPORT __attribute__((visibility("default")))

#ifdef GYRETEST_V8
GYRETEST_EXPORT gyreNet_v8_t ncclNetPlugin_v8 = {
    "GyreTest", init, devices, getProperties<gyreNetProperties_v8_t>, listenFn, connectFn, acceptFn, regMr,
    regMrDmaBuf, deregMr, isendV8, irecvV8, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr};
#endif

#ifdef GYRETEST_V9
GYRETEST_EXPORT gyreNet_v9_t ncclNetPlugin_v9 = {
    "GyreTest", initV9, devices, getProperties<gyreNetProperties_v9_t>, listenFn, connectFn, acceptFn, regMr,
    regMrDmaBuf, deregMr, isend, irecv, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr,
    makeVDevice};
#endif

#ifdef GYRETEST_V10
GYRETEST_EXPORT gyreNet_v10_t ncclNetPlugin_v10 = {
    "GyreTest", initV10, devices, getProperties<gyreNetProperties_v10_t>, listenFn, connectV10, acceptFn, regMr,
    regMrDmaBuf, deregMr, isendV10, irecvV10, iflush, test, closeComm, closeComm, closeListen, nullptr, nullptr,
    makeVDevice};
#endif

#ifdef GYRETEST_V11
GYRETEST_EXPORT gyreNet_v11_t ncclNetPlugin_v11 = {
    "GyreTest", initV11<11>, devices, propertiesV11<gyreNetProperties_v11_t>, listenV11, connectV11, acceptFn,
    regMr, regMrDmaBuf, deregMr, isendV10, irecvV10, iflush, test, closeComm, closeComm, closeListen, nullptr,
    nullptr, makeVDeviceV11, finalizeV11, setNetAttrV11};
#endif

#if defined(GYRETEST_V12) || defined(GYRETEST_V13)
#ifdef GYRETEST_V12
#define GYRETEST_NEWEST ncclNetPlugin_v12
#else
#define GYRETEST_NEWEST ncclNetPlugin_v13  // a version gyre does not know: the v12 layout under another name
#endif
GYRETEST_EXPORT gyreNet_v12_t GYRETEST_NEWEST = {
    "GyreTest", initV11<12>, devices, propertiesV11<gyreNetProperties_v12_t>, listenV11, connectV11, acceptFn,
    regMr, regMrDmaBuf, deregMr, isendV10, irecvV10, iflush, test, closeComm, closeComm, closeListen, nullptr,
    nullptr, makeVDeviceV12, finalizeV11, setNetAttrV11};
#endif

// For the tests: the version gyre initialized (0: none), whether v10's init
// got a profiler callback, and the trafficClass v10's connect() was given.
__attribute__((visibility("default"))) void gyretest_version(int* version, int* sawProfiler, int* trafficClass) {
  *version = gVersion;
  *sawProfiler = gSawProfiler;
  *trafficClass = gTrafficClass;
}

// For the tests: requests still owned by gyre when it closed their comm, and
// listen()/connect() calls of v11+ that did not get init()'s context back.
__attribute__((visibility("default"))) void gyretest_close_faults(long* inflightAtClose, long* contextErrors) {
  *inflightAtClose = gInflightAtClose;
  *contextErrors = gContextErrors;
}

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

// Before gyre can look at the tables.
__attribute__((constructor)) static void applyNullFunction() {
  const char* name = getenv("TESTNET_NULL_FUNCTION");
  if (!name || !*name) return;
#ifdef GYRETEST_V8
  nullFunction(&ncclNetPlugin_v8, name);
#endif
#ifdef GYRETEST_V9
  nullFunction(&ncclNetPlugin_v9, name);
#endif
#ifdef GYRETEST_V10
  nullFunction(&ncclNetPlugin_v10, name);
#endif
#ifdef GYRETEST_V11
  nullFunction(&ncclNetPlugin_v11, name);
#endif
#if defined(GYRETEST_V12) || defined(GYRETEST_V13)
  nullFunction(&GYRETEST_NEWEST, name);
#endif
}
