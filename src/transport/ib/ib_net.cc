// The IB network's gyreNet_v8_t functions (protocol: ib_comm.h).
#include "src/transport/ib/ib_net.h"

#include <arpa/inet.h>
#include <poll.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "src/bootstrap/interfaces.h"
#include "src/config/env.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/ib/ib_comm.h"
#include "src/transport/ib/ib_qp.h"
#include "src/transport/ib/ib_records.h"
#include "src/transport/ib/ib_async.h"
#include "src/transport/ib/reg_cache.h"
#include "src/transport/ib/verbs_api.h"

namespace gyre::ib {
namespace {

// Bounds each blocking piece of set-up (a TCP connect, a small send): the
// caller's init deadline bounds the whole, between the calls.
constexpr double kSetupSeconds = 5;

static_assert(sizeof(Handle) <= GYRE_NET_HANDLE_MAXSIZE);

struct ListenComm {
  const IbPort* port;
  Socket listener;
  IbComm* pending = nullptr;
};

const std::vector<IbPort>* gPorts = nullptr;

// The sender's comm while connect() is retried, by the caller's handle
// buffer (which stays put between the calls). Not kept inside the handle:
// its bytes came from the peer, so a pointer read from them would be the
// peer's choice.
std::mutex gConnectingMu;
std::map<const void*, IbComm*> gConnecting;

IbComm* connecting(const void* handle) {
  std::lock_guard<std::mutex> lock(gConnectingMu);
  auto it = gConnecting.find(handle);
  return it == gConnecting.end() ? nullptr : it->second;
}

const IbPort* portOf(int dev) {
  if (!gPorts || dev < 0 || dev >= static_cast<int>(gPorts->size())) return nullptr;
  return &(*gPorts)[static_cast<size_t>(dev)];
}

ncclResult_t badDev(int dev) {
  return fail(ncclInvalidArgument, "NET/IB: device %d does not exist (%zu ports)", dev, gPorts ? gPorts->size() : 0);
}

ncclResult_t ibInit(gyreNetLogger_t) { return ncclSuccess; }

ncclResult_t ibDevices(int* n) {
  *n = gPorts ? static_cast<int>(gPorts->size()) : 0;
  return ncclSuccess;
}

ncclResult_t ibGetProperties(int dev, gyreNetProperties_v8_t* p) {
  const IbPort* port = portOf(dev);
  if (!port) return badDev(dev);
  memset(p, 0, sizeof(*p));
  p->name = const_cast<char*>(port->device.c_str());
  // dma-buf registration (GPU memory exported by the CUDA driver) needs
  // ibv_reg_dmabuf_mr, rdma-core 34 and later.
  p->ptrSupport = GYRE_NET_PTR_HOST | (verbs(nullptr)->regDmabufMr ? GYRE_NET_PTR_DMABUF : 0);
  p->regIsGlobal = 1;
  p->speed = port->speedMbps;
  p->port = port->port;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  return ncclSuccess;
}

ncclResult_t ibListen(int dev, void* handle, void** listenComm) {
  const IbPort* port = portOf(dev);
  if (!port) return badDev(dev);
  static Interface iface;
  static ncclResult_t ifaceResult = [] { return selectInterface(&iface); }();
  if (ifaceResult != ncclSuccess) return fail(ifaceResult, "NET/IB: no interface for the set-up sockets");
  auto* l = new ListenComm{port, Socket(), nullptr};
  NetAddress bound;
  ncclResult_t r = Socket::listenOn(iface.address, &l->listener, &bound);
  if (r != ncclSuccess) {
    delete l;
    return r;
  }
  Handle h{kRecordMagic, bound.toWire()};
  memset(handle, 0, GYRE_NET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof(h));
  *listenComm = l;
  return ncclSuccess;
}

// Reads what is there of the peer's QpInfo; true once it is whole.
ncclResult_t readTheirs(IbComm* c, bool* whole) {
  while (c->theirsBytes < sizeof(c->theirs)) {
    size_t n = 0;
    GYRE_CHECK(c->sock.tryRecv(reinterpret_cast<char*>(&c->theirs) + c->theirsBytes,
                               sizeof(c->theirs) - c->theirsBytes, &n, c->what.c_str()));
    if (n == 0) break;
    c->theirsBytes += n;
  }
  *whole = c->theirsBytes == sizeof(c->theirs);
  return *whole ? checkQpInfo(c->theirs, c->mine, c->what) : ncclSuccess;
}

void destroyComm(IbComm* c) {
  asyncDetach(c);  // before its QPs go: the event thread matches events to them
  const VerbsApi* v = verbs(nullptr);
  for (ibv_qp* q : c->qps) v->destroyQp(q);
  if (c->cq) v->destroyCq(c->cq);
  if (c->fifoMr) v->deregMr(c->fifoMr);
  delete c;
}

ncclResult_t ibConnect(int dev, void* handle, void** sendComm, gyreNetDeviceHandle_v8_t**) {
  *sendComm = nullptr;
  const IbPort* port = portOf(dev);
  if (!port) return badDev(dev);
  IbComm* c = connecting(handle);
  if (!c) {
    NetAddress addr;
    GYRE_CHECK(handleAddress(handle, &addr));
    c = new IbComm();
    c->isSend = true;
    c->port = port;
    c->what = port->label() + " -> " + addr.toString();
    // The receiver listened before it sent the handle: a refusal means it
    // is gone, so that fails at once instead of retrying.
    const Deadline refused = Deadline::afterMs(0);
    ncclResult_t r = Socket::connectTo(addr, Deadline::afterSeconds(kSetupSeconds), nullptr, &c->sock, c->what.c_str(),
                                       &refused);
    if (r == ncclSuccess) r = createQps(c);
    if (r == ncclSuccess) asyncAttach(c);
    if (r == ncclSuccess) {
      c->fifoMr = verbs(nullptr)->regMr(port->pd, c->fifo, sizeof(c->fifo),
                                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
      if (!c->fifoMr) r = fail(ncclSystemError, "NET/IB %s: ibv_reg_mr of the FIFO failed: %s", c->what.c_str(),
                               strerror(errno));
    }
    if (r == ncclSuccess) {
      c->mine.fifoAddr = reinterpret_cast<uintptr_t>(c->fifo);
      c->mine.fifoRkey = c->fifoMr->rkey;
      r = c->sock.sendAll(&c->mine, sizeof(c->mine), Deadline::afterSeconds(kSetupSeconds), nullptr, c->what.c_str());
    }
    if (r != ncclSuccess) {
      destroyComm(c);
      return r;
    }
    std::lock_guard<std::mutex> lock(gConnectingMu);
    gConnecting[handle] = c;
  }
  bool whole = false;
  ncclResult_t r = readTheirs(c, &whole);
  if (r == ncclSuccess && !whole) return ncclSuccess;
  if (r == ncclSuccess) r = connectQps(c);
  const char ready = 1;
  if (r == ncclSuccess)
    r = c->sock.sendAll(&ready, 1, Deadline::afterSeconds(kSetupSeconds), nullptr, c->what.c_str());
  {
    std::lock_guard<std::mutex> lock(gConnectingMu);
    gConnecting.erase(handle);
  }
  if (r != ncclSuccess) {
    destroyComm(c);
    return r;
  }
  *sendComm = c;
  return ncclSuccess;
}

ncclResult_t ibAccept(void* listenComm, void** recvComm, gyreNetDeviceHandle_v8_t**) {
  *recvComm = nullptr;
  auto* l = static_cast<ListenComm*>(listenComm);
  IbComm* c = l->pending;
  if (!c) {
    pollfd p{l->listener.fd(), POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return ncclSuccess;
    c = new IbComm();
    c->port = l->port;
    NetAddress from;
    ncclResult_t r = l->listener.acceptOne(&c->sock, &from, Deadline::afterSeconds(kSetupSeconds), nullptr,
                                           "NET/IB accept");
    if (r != ncclSuccess) {
      delete c;
      return r;
    }
    c->what = l->port->label() + " <- " + from.toString();
    r = createQps(c);
    if (r != ncclSuccess) {
      destroyComm(c);
      return r;
    }
    asyncAttach(c);
    l->pending = c;
  }
  if (c->stage == 0) {
    bool whole = false;
    GYRE_CHECK(readTheirs(c, &whole));
    if (!whole) return ncclSuccess;
    c->fifoMr = verbs(nullptr)->regMr(c->port->pd, c->fifo, sizeof(c->fifo), IBV_ACCESS_LOCAL_WRITE);
    if (!c->fifoMr)
      return fail(ncclSystemError, "NET/IB %s: ibv_reg_mr of the FIFO failed: %s", c->what.c_str(), strerror(errno));
    GYRE_CHECK(connectQps(c));
    GYRE_CHECK(postReceives(c));
    GYRE_CHECK(c->sock.sendAll(&c->mine, sizeof(c->mine), Deadline::afterSeconds(kSetupSeconds), nullptr,
                               c->what.c_str()));
    c->stage = 1;
  }
  // The sender's QPs are ready to take RDMA writes only once it says so.
  char ready = 0;
  size_t n = 0;
  GYRE_CHECK(c->sock.tryRecv(&ready, 1, &n, c->what.c_str()));
  if (n == 0) return ncclSuccess;
  l->pending = nullptr;
  *recvComm = c;
  return ncclSuccess;
}

ncclResult_t ibRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  auto* c = static_cast<IbComm*>(comm);
  if (type != GYRE_NET_PTR_HOST)
    return fail(ncclInvalidUsage, "NET/IB %s: only host memory can be registered in this build (type %d)",
                c->what.c_str(), type);
  IbMr* m = nullptr;
  GYRE_CHECK(cachedRegister(c->port->pd, data, size, c->port->label().c_str(), &m));
  *mhandle = m;
  return ncclSuccess;
}

// Memory behind a dma-buf descriptor (GPU memory the CUDA driver exported
// with cuMemGetHandleForAddressRange): the NIC reaches it directly, and
// work requests address it by `data` (the region's iova). Not cached: the
// descriptor, not the address, names the memory.
ncclResult_t ibRegMrDmaBuf(void* comm, void* data, size_t size, int, uint64_t offset, int fd, void** mhandle) {
  auto* c = static_cast<IbComm*>(comm);
  const VerbsApi* v = verbs(nullptr);
  if (!v->regDmabufMr)
    return fail(ncclInvalidUsage, "NET/IB %s: %s has no ibv_reg_dmabuf_mr (rdma-core 34 or later registers GPU memory)",
                c->what.c_str(), v->library.c_str());
  ibv_mr* mr = v->regDmabufMr(c->port->pd, offset, size, reinterpret_cast<uintptr_t>(data), fd,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!mr)
    return fail(ncclSystemError, "NET/IB %s: ibv_reg_dmabuf_mr of %zu bytes (fd %d, offset %llu) on %s failed: %s",
                c->what.c_str(), size, fd, static_cast<unsigned long long>(offset), c->port->label().c_str(),
                strerror(errno));
  *mhandle = new IbMr{mr, true};
  return ncclSuccess;
}

ncclResult_t ibDeregMr(void*, void* mhandle) {
  auto* m = static_cast<IbMr*>(mhandle);
  if (!m->dmabuf) return cachedDeregister(m);
  const int rc = verbs(nullptr)->deregMr(m->mr);
  delete m;
  if (rc != 0) return fail(ncclSystemError, "NET/IB: ibv_dereg_mr of a dma-buf region failed: %s", strerror(rc));
  return ncclSuccess;
}

ncclResult_t ibIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

ncclResult_t ibCloseComm(void* comm) {
  if (comm) destroyComm(static_cast<IbComm*>(comm));
  return ncclSuccess;
}

ncclResult_t ibCloseListen(void* listenComm) {
  auto* l = static_cast<ListenComm*>(listenComm);
  if (l->pending) destroyComm(l->pending);
  delete l;
  return ncclSuccess;
}

const gyreNet_v8_t kIbNet = {
    "IB",     ibInit,   ibDevices, ibGetProperties, ibListen,     ibConnect,     ibAccept,
    ibRegMr,  ibRegMrDmaBuf, ibDeregMr, ibIsend,    ibIrecv,      ibIflush,      ibTest,
    ibCloseComm, ibCloseComm, ibCloseListen, nullptr, nullptr};

}  // namespace
}  // namespace gyre::ib

namespace gyre {

ncclResult_t probeIbNetwork(Network* out, std::string* whyNot) {
  out->api = nullptr;
  const std::vector<ib::IbPort>* ports = nullptr;
  GYRE_CHECK(ib::ibPorts(&ports, whyNot));
  if (ports->empty()) return ncclSuccess;
  ib::gPorts = ports;
  out->name = "IB";
  out->api = &ib::kIbNet;
  out->devices = static_cast<int>(ports->size());
  out->external = false;
  return ncclSuccess;
}

}  // namespace gyre
