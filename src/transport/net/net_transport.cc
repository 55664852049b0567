#include "src/transport/net/net_transport.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "src/bootstrap/acceptor.h"
#include "src/bootstrap/bootstrap.h"
#include "src/debug/error.h"
#include "src/debug/log.h"
#include "src/transport/abort_notice.h"
#include "src/transport/net/net_conn.h"

namespace gyre {
namespace {

using net_detail::NetConn;

// Sent by the connecting (sending) side on the bootstrap socket, so steps of
// different sizes fail at set-up instead of as truncated messages.
struct NetParams {
  uint64_t slotBytes;
};

// Page-aligned: verbs registration pins whole pages.
constexpr size_t kSlotAlign = 4096;

int controlTag(int channel) { return kTagTransportBase + channel; }

// Checked before anything is connected, so both ends fail alike.
ncclResult_t checkStepSize(const NetConn* c, size_t slotBytes) {
  if (c->net->maxMessageBytes != 0 && slotBytes > c->net->maxMessageBytes)
    return fail(ncclInvalidUsage,
                "%s: steps of %zu bytes (NCCL_BUFFSIZE) exceed the %zu bytes the network takes in one message "
                "(its maxP2pBytes)",
                c->what.c_str(), slotBytes, c->net->maxMessageBytes);
  return ncclSuccess;
}

ncclResult_t allocFifo(NetConn* c, size_t slotBytes, Connection* out) {
  void* p = nullptr;
  if (posix_memalign(&p, kSlotAlign, kFifoSlots * slotBytes) != 0)
    return fail(ncclSystemError, "%s: could not allocate %zu bytes of FIFO", c->what.c_str(), kFifoSlots * slotBytes);
  memset(p, 0, kFifoSlots * slotBytes);
  c->slots = static_cast<char*>(p);
  c->slotBytes = slotBytes;
  out->fifo.slots = c->slots;
  out->fifo.slotBytes = slotBytes;
  out->fifo.meta = c->meta;
  out->fifo.tail = &c->tail;
  out->fifo.head = &c->head;
  out->needsProgress = true;
  out->state = c;
  return ncclSuccess;
}

// Tests one request; *done once it finished (and it is cleared).
ncclResult_t testReq(NetConn* c, void** req, bool* done, int* size) {
  int d = 0;
  *done = false;
  if (!*req) {
    *done = true;
    return ncclSuccess;
  }
  ncclResult_t r = c->net->api->test(*req, &d, size);
  if (r != ncclSuccess) return r;  // kept: later passes test it again and get the same error
  if (d) {
    *req = nullptr;
    *done = true;
  }
  return ncclSuccess;
}

ncclResult_t progressSend(NetConn* c, int* culprit) {
  const gyreNet_v8_t* api = c->net->api;
  if (!c->failure.empty()) {
    *culprit = c->peer;
    return fail(ncclRemoteError, "%s", c->failure.c_str());
  }
  // Retire finished steps in order: a slot is free once both its messages left.
  while (c->head < c->posted) {
    const int s = static_cast<int>(c->head % kFifoSlots);
    bool metaDone = false, dataDone = false;
    int size = 0;
    ncclResult_t r = testReq(c, &c->metaReq[s], &metaDone, &size);
    if (r == ncclSuccess && metaDone) r = testReq(c, &c->dataReq[s], &dataDone, &size);
    if (r != ncclSuccess) {
      c->failure = c->what + ": the network failed a send: " + net_detail::netFailureText(c->net);
      *culprit = c->peer;
      return fail(ncclRemoteError, "%s", c->failure.c_str());
    }
    if (!metaDone || !dataDone) break;
    storeRelease(&c->head, c->head + 1);
  }
  const uint64_t tail = loadAcquire(&c->tail);
  while (c->posted < tail) {
    const int s = static_cast<int>(c->posted % kFifoSlots);
    // A network's ncclRemoteError from isend is the receiver's doing (IB: a
    // FIFO entry no receive of this send matches).
    if (!c->half) {
      ncclResult_t r = api->isend(c->comm, &c->meta[s], sizeof(SlotMeta), 0, c->mhMeta, &c->metaReq[s]);
      if (r == ncclRemoteError) *culprit = c->peer;
      if (r != ncclSuccess) return fail(r, "%s: isend() failed: %s", c->what.c_str(),
                                        net_detail::netFailureText(c->net).c_str());
      if (!c->metaReq[s]) break;  // the receiver has no free slot yet
      c->half = true;
    }
    ncclResult_t r = api->isend(c->comm, c->slots + s * c->slotBytes, static_cast<int>(c->meta[s].bytes), 0,
                                c->mhSlots, &c->dataReq[s]);
    if (r == ncclRemoteError) *culprit = c->peer;
    if (r != ncclSuccess) return fail(r, "%s: isend() failed: %s", c->what.c_str(),
                                      net_detail::netFailureText(c->net).c_str());
    if (!c->dataReq[s]) break;
    c->half = false;
    ++c->posted;
  }
  return ncclSuccess;
}

ncclResult_t progressRecv(NetConn* c, Connection& conn, int* culprit) {
  const gyreNet_v8_t* api = c->net->api;
  if (c->noticeCulprit >= 0) {
    *culprit = c->noticeCulprit;
    return failFromAbortNotice(c->noticeNamed, c->rank, c->peer, c->nranks);
  }
  if (peerClosedOf(conn)) return ncclSuccess;
  // Complete arrived steps in order.
  while (c->tail < c->posted) {
    const int s = static_cast<int>(c->tail % kFifoSlots);
    bool metaDone = false, dataDone = false;
    int size = 0;
    if (c->metaReq[s]) {
      ncclResult_t r = testReq(c, &c->metaReq[s], &metaDone, &size);
      if (r == ncclSystemError && !c->net->external) {
        // A failure of this rank's own network (the IB port went down, a
        // device event): an error now, whatever the peer did. Plugins are
        // not read this way: many report a peer's close as ncclSystemError.
        *culprit = c->peer;
        return fail(r, "%s: the network failed a receive: %s", c->what.c_str(),
                    net_detail::netFailureText(c->net).c_str());
      }
      if (r != ncclSuccess) {
        // Nothing of this step arrived: the peer closed or its link went
        // down (ncclRemoteError). That is an error only if this rank still
        // needs data from it (the executor decides, as for a closed socket).
        conn.closedHow = c->what + ": " + net_detail::netFailureText(c->net);
        GYRE_INFO("NET", "%s: receive failed before step %llu arrived; the peer is taken to have closed",
                  conn.closedHow.c_str(), static_cast<unsigned long long>(c->tail + 1));
        markPeerClosed(conn);
        return ncclSuccess;
      }
      if (!metaDone) break;
      if (c->meta[s].flags & kMetaAbort) {
        c->noticeNamed = c->meta[s].count;
        ncclResult_t r = failFromAbortNotice(c->noticeNamed, c->rank, c->peer, c->nranks, culprit);
        c->noticeCulprit = *culprit;
        return r;
      }
    }
    ncclResult_t r = testReq(c, &c->dataReq[s], &dataDone, &size);
    if (r != ncclSuccess) {
      *culprit = c->peer;
      return fail(ncclRemoteError, "%s: the network failed a receive in the middle of step %llu: %s",
                  c->what.c_str(), static_cast<unsigned long long>(c->tail + 1),
                  net_detail::netFailureText(c->net).c_str());
    }
    if (!dataDone) break;
    if (static_cast<uint32_t>(size) != c->meta[s].bytes) {
      *culprit = c->peer;
      return fail(ncclRemoteError, "%s: step %llu carried %d bytes, its header says %u", c->what.c_str(),
                  static_cast<unsigned long long>(c->tail + 1), size, c->meta[s].bytes);
    }
    storeRelease(&c->tail, c->tail + 1);
  }
  // Post both receives of every free slot (a slot is free once consumed).
  const uint64_t head = loadAcquire(&c->head);
  while (c->posted < head + kFifoSlots) {
    const int s = static_cast<int>(c->posted % kFifoSlots);
    int tag = 0;
    if (!c->half) {
      void* data = &c->meta[s];
      int size = sizeof(SlotMeta);
      void* mh = c->mhMeta;
      ncclResult_t r = api->irecv(c->comm, 1, &data, &size, &tag, &mh, &c->metaReq[s]);
      if (r != ncclSuccess) return fail(r, "%s: irecv() failed: %s", c->what.c_str(),
                                        net_detail::netFailureText(c->net).c_str());
      if (!c->metaReq[s]) break;
      c->half = true;
    }
    void* data = c->slots + s * c->slotBytes;
    int size = static_cast<int>(c->slotBytes);
    void* mh = c->mhSlots;
    ncclResult_t r = api->irecv(c->comm, 1, &data, &size, &tag, &mh, &c->dataReq[s]);
    if (r != ncclSuccess) return fail(r, "%s: irecv() failed: %s", c->what.c_str(),
                                      net_detail::netFailureText(c->net).c_str());
    if (!c->dataReq[s]) break;
    c->half = false;
    ++c->posted;
  }
  return ncclSuccess;
}

class NetTransport final : public Transport {
 public:
  explicit NetTransport(const Network* net) : net_(net), name_("NET/" + net->name) {}

  const char* name() const override { return name_.c_str(); }
  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return true; }

  std::string via(const Connection& conn) const override {
    auto* c = static_cast<const NetConn*>(conn.state);
    return name_ + "/" + std::to_string(c ? c->dev : 0);
  }

  // Opens the bootstrap socket the handle will come back on; nothing here
  // waits for the receiver (every rank connects its sends before accepting).
  ncclResult_t connectSend(const ConnectContext& ctx, int peer, Connection* out) override {
    NetConn* c = newConn(ctx, peer, true, out);
    GYRE_CHECK(checkStepSize(c, ctx.slotBytes));
    NetAddress addr = NetAddress::fromWire(ctx.bootstrap->peers()[peer].listen);
    GYRE_CHECK(connectToPeer(addr, ctx.bootstrap->link(), ctx.rank, controlTag(ctx.channel), ctx.deadline,
                             ctx.abort, &c->control, c->what.c_str()));
    NetParams params{ctx.slotBytes};
    GYRE_CHECK(c->control.sendAll(&params, sizeof(params), ctx.deadline, ctx.abort, c->what.c_str()));
    GYRE_CHECK(allocFifo(c, ctx.slotBytes, out));
    net_detail::addPending(c);
    return ncclSuccess;
  }

  ncclResult_t connectRecv(const ConnectContext& ctx, int peer, Connection* out) override {
    NetConn* c = newConn(ctx, peer, false, out);
    GYRE_CHECK(checkStepSize(c, ctx.slotBytes));
    GYRE_CHECK(ctx.bootstrap->acceptor().acceptFrom(peer, controlTag(ctx.channel), ctx.deadline, ctx.abort,
                                                    &c->control));
    NetParams params{};
    GYRE_CHECK(c->control.recvAll(&params, sizeof(params), ctx.deadline, ctx.abort, c->what.c_str()));
    if (params.slotBytes != ctx.slotBytes)
      return fail(ncclInvalidUsage, "%s: rank %d uses %llu-byte steps, this rank %zu (NCCL_BUFFSIZE differs)",
                  c->what.c_str(), peer, static_cast<unsigned long long>(params.slotBytes), ctx.slotBytes);
    ncclResult_t r = net_->api->listen(c->dev, c->handle, &c->listenComm);
    if (r != ncclSuccess)
      return fail(r, "%s: listen() failed: %s", c->what.c_str(), net_detail::netFailureText(net_).c_str());
    GYRE_CHECK(c->control.sendAll(c->handle, sizeof(c->handle), ctx.deadline, ctx.abort, c->what.c_str()));
    GYRE_CHECK(allocFifo(c, ctx.slotBytes, out));
    net_detail::addPending(c);
    return ncclSuccess;
  }

  // Drives every pending handshake of the process until this one is done.
  ncclResult_t finishConnect(Connection& conn) override {
    auto* c = static_cast<NetConn*>(conn.state);
    while (!c->ready) {
      net_detail::drivePending();
      if (c->setupError != ncclSuccess) return fail(c->setupError, "%s", c->setupText.c_str());
      if (c->ready) break;
      if (c->abort && c->abort->load())
        return fail(ncclInvalidUsage, "%s: set-up aborted (ncclCommAbort)", c->what.c_str());
      if (c->deadline.expired())
        return fail(ncclRemoteError, "%s: the network connection to rank %d was not set up in time (GYRE_INIT_TIMEOUT)",
                    c->what.c_str(), c->peer);
      usleep(100);
    }
    return ncclSuccess;
  }

  ncclResult_t progress(Connection& conn, int* culprit) override {
    auto* c = static_cast<NetConn*>(conn.state);
    if (!c->ready) {  // connections made for ncclSend/ncclRecv finish here
      net_detail::drivePending();
      if (c->setupError != ncclSuccess) {
        *culprit = c->peer;
        return fail(c->setupError, "%s", c->setupText.c_str());
      }
      if (!c->ready) return ncclSuccess;
    }
    return c->isSend ? progressSend(c, culprit) : progressRecv(c, conn, culprit);
  }

  // Networks give no descriptor to sleep on: the executor yields and polls.
  bool pollRequest(const Connection&, pollfd*) const override { return false; }

  // Best effort: the notice goes as the next step's header when that slot is
  // free and no step is half sent.
  void sendAbortNotice(Connection& conn, int culprit) override {
    auto* c = static_cast<NetConn*>(conn.state);
    if (!conn.isSend || !c || !c->ready || c->half || c->noticeSent || !c->failure.empty()) return;
    if (c->posted - c->head >= kFifoSlots) return;
    const int s = static_cast<int>(c->posted % kFifoSlots);
    SlotMeta notice{};
    notice.flags = kMetaAbort;
    notice.count = static_cast<uint64_t>(culprit);
    c->meta[s] = notice;
    void* req = nullptr;
    const std::string reported = lastErrorText();
    if (net_->api->isend(c->comm, &c->meta[s], sizeof(SlotMeta), 0, c->mhMeta, &req) == ncclSuccess && req) {
      c->metaReq[s] = req;
      c->noticeSent = true;
    } else {
      // The notice is best effort: its own failure (the same dead
      // connection, usually) must not replace the error being reported.
      recordFailure(ncclSuccess, reported.c_str());
    }
  }

  void beginClose(Connection& conn) override {
    auto* c = static_cast<NetConn*>(conn.state);
    if (!c) return;
    net_detail::removePending(c);
    net_detail::beginClose(c);
  }

  // Completes every posted request first (net_close.cc), so the network
  // holds none into the FIFO when it is deregistered and freed.
  void close(Connection& conn) override {
    auto* c = static_cast<NetConn*>(conn.state);
    if (!c) return;
    net_detail::removePending(c);
    net_detail::finishClose(c);  // releases c, now or from the reaper
    conn.state = nullptr;
    conn.fifo = Fifo{};
  }

 private:
  NetConn* newConn(const ConnectContext& ctx, int peer, bool isSend, Connection* out) {
    auto* c = new NetConn();
    c->net = net_;
    c->dev = net_->devices > 0 ? ctx.channel % net_->devices : 0;
    if (c->dev < 0) c->dev = -c->dev;
    c->rank = ctx.rank;
    c->nranks = ctx.bootstrap->nranks();
    c->peer = peer;
    c->isSend = isSend;
    c->deadline = ctx.deadline;
    c->abort = ctx.abort;
    c->what = name_ + "/" + std::to_string(c->dev) + (isSend ? " to rank " : " from rank ") + std::to_string(peer) +
              " (" + ctx.bootstrap->peers()[peer].host + ")";
    out->state = c;
    return c;
  }

  const Network* net_;
  std::string name_;
};

}  // namespace

Transport* netTransportFor(const Network* net) {
  static std::mutex mu;
  static std::map<const Network*, std::unique_ptr<NetTransport>> transports;
  std::lock_guard<std::mutex> lock(mu);
  auto& t = transports[net];
  if (!t) t = std::make_unique<NetTransport>(net);
  return t.get();
}

}  // namespace gyre
