// Set-up of net-transport connections: receiver listen() -> handle over a
// bootstrap socket -> sender connect(), receiver accept(), both non-blocking,
// then the FIFO is registered with the network.
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/net/net_conn.h"
#include "src/transport/net/plugin_loader.h"

namespace gyre::net_detail {
namespace {

std::mutex gPendingMu;
std::vector<NetConn*> gPending;

ncclResult_t netFail(NetConn* c, ncclResult_t r, const char* op) {
  std::string why = netFailureText(c->net);
  return fail(r == ncclSuccess ? ncclSystemError : r, "%s: %s() failed: %s", c->what.c_str(), op, why.c_str());
}

ncclResult_t registerFifo(NetConn* c) {
  const gyreNet_v8_t* api = c->net->api;
  ncclResult_t r = api->regMr(c->comm, c->slots, kFifoSlots * c->slotBytes, GYRE_NET_PTR_HOST, &c->mhSlots);
  if (r != ncclSuccess) return netFail(c, r, "regMr");
  r = api->regMr(c->comm, c->meta, sizeof(c->meta), GYRE_NET_PTR_HOST, &c->mhMeta);
  if (r != ncclSuccess) return netFail(c, r, "regMr");
  return ncclSuccess;
}

}  // namespace

std::string netFailureText(const Network* net) {
  if (net->external) return lastPluginWarning(net->name);
  return lastErrorText();
}

ncclResult_t handshakeStep(NetConn* c) {
  const gyreNet_v8_t* api = c->net->api;
  gyreNetDeviceHandle_v8_t* devHandle = nullptr;  // host networking only: left null
  if (c->isSend) {
    while (c->handleBytes < sizeof(c->handle)) {
      size_t n = 0;
      GYRE_CHECK(c->control.tryRecv(c->handle + c->handleBytes, sizeof(c->handle) - c->handleBytes, &n,
                                    c->what.c_str()));
      if (n == 0) return ncclSuccess;
      c->handleBytes += n;
    }
    ncclResult_t r = api->connect(c->dev, c->handle, &c->comm, &devHandle);
    if (r != ncclSuccess) return netFail(c, r, "connect");
    if (!c->comm) return ncclSuccess;
  } else {
    ncclResult_t r = api->accept(c->listenComm, &c->comm, &devHandle);
    if (r != ncclSuccess) return netFail(c, r, "accept");
    if (!c->comm) return ncclSuccess;
    (void)api->closeListen(c->listenComm);
    c->listenComm = nullptr;
  }
  GYRE_CHECK(registerFifo(c));
  // The network carries the data from here; `control` waits for close.
  c->ready = true;
  return ncclSuccess;
}

void addPending(NetConn* c) {
  std::lock_guard<std::mutex> lock(gPendingMu);
  gPending.push_back(c);
}

void removePending(NetConn* c) {
  std::lock_guard<std::mutex> lock(gPendingMu);
  gPending.erase(std::remove(gPending.begin(), gPending.end(), c), gPending.end());
}

void drivePending() {
  std::lock_guard<std::mutex> lock(gPendingMu);
  for (NetConn* p : gPending) {
    if (p->ready || p->setupError != ncclSuccess) continue;
    ncclResult_t r = handshakeStep(p);
    if (r != ncclSuccess) {
      p->setupError = r;
      p->setupText = lastErrorText();
    }
  }
  gPending.erase(std::remove_if(gPending.begin(), gPending.end(), [](NetConn* p) { return p->ready; }),
                 gPending.end());
}

}  // namespace gyre::net_detail
