#include "src/transport/p2p/p2p_transport.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "src/bootstrap/acceptor.h"
#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/net_address.h"
#include "src/debug/error.h"
#include "src/device/runtime/deferred_frees.h"
#include "src/device/runtime/ipc_registry.h"
#include "src/device/runtime/runtime.h"
#include "src/transport/abort_notice.h"

namespace gyre {
namespace {

// Above the socket transport's tags (kTagTransportBase + channel, data
// sockets at multiples of 1 << 20) and below ncclCommShrink's (1 << 30).
constexpr int32_t kP2PTagBase = kTagTransportBase + (1 << 28);

struct P2PHello {  // sender -> receiver
  char magic[8];
  uint64_t slotBytes;
  int32_t pid;
  int32_t cudaDev;
};

struct P2PReply {  // receiver -> sender
  int32_t pid;
  int32_t status;  // 0: ok; else the receiver failed (its error says why)
  uint64_t pointer;  // for a sender in the same process
  uint64_t offset;   // of the FIFO in the allocation `shared` describes
  SharedAllocation shared;  // for a sender in another process
};

constexpr char kHelloMagic[8] = {'G', 'Y', 'R', 'E', 'P', '2', 'P', '1'};

// Where each part of the FIFO sits in the receiver's allocation: the counters
// on their own 128-byte lines, so polling one never contends with the other,
// then the LL slots (fifo.h: a region of their own).
struct FifoLayout {
  size_t slotsBytes, metaOffset, tailOffset, headOffset, llOffset, total;
  explicit FifoLayout(size_t slotBytes) {
    slotsBytes = kFifoSlots * slotBytes;
    metaOffset = slotsBytes;
    tailOffset = metaOffset + ((kFifoSlots * sizeof(SlotMeta) + 127) / 128) * 128;
    headOffset = tailOffset + 128;
    llOffset = headOffset + 128;
    total = llOffset + kFifoSlots * llSlotBytesFor(slotBytes);
  }
};

struct P2PConn {
  Socket socket;      // kept open: EOF tells that the peer process went away
  std::string what;
  void* owned = nullptr;   // receiver: the FIFO allocation
  std::set<uint64_t> heldBlocks;  // sender: the peer's FIFO block mapped by IPC
  bool ready = false;      // sender: finishConnect has run
  Deadline deadline = Deadline::afterSeconds(0);  // init's, for finishConnect
  const std::atomic<bool>* abort = nullptr;
  size_t slotBytes = 0;
  int rank = -1;  // this side's rank, to tell a notice that blames it
  int nranks = 0;  // the communicator's size, to check abort notices
};

void pointFifoAt(char* base, size_t slotBytes, Connection* out) {
  FifoLayout l(slotBytes);
  out->fifo.slots = base;
  out->fifo.slotBytes = slotBytes;
  out->fifo.meta = reinterpret_cast<SlotMeta*>(base + l.metaOffset);
  out->fifo.tail = reinterpret_cast<uint64_t*>(base + l.tailOffset);
  out->fifo.head = reinterpret_cast<uint64_t*>(base + l.headOffset);
  out->fifo.llSlots = base + l.llOffset;
  out->fifo.llSlotBytes = llSlotBytesFor(slotBytes);
}

int tagOf(int channel) { return kP2PTagBase + channel; }

class P2PTransport final : public Transport {
 public:
  const char* name() const override { return "p2p"; }
  std::string via(const Connection&) const override { return "P2P/IPC"; }

  // Same host, both device ranks, and the GPUs reach each other: trivially
  // when they are one GPU (same PCI address), else when this process sees the
  // peer's GPU and has peer access to it.
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    DeviceRuntime* rt = deviceRuntime();
    if (!rt || self.hostHash != peer.hostHash || self.isHostComm || peer.isHostComm) return false;
    if (self.busId == peer.busId) return true;
    int peerDevice = -1;
    return rt->deviceAtBusId(peer.busId, &peerDevice) && rt->canAccessPeer(self.cudaDev, peerDevice);
  }

  ncclResult_t connectSend(const ConnectContext& ctx, int peer, Connection* out) override {
    auto* s = start(ctx, peer, true, out);
    NetAddress addr = NetAddress::fromWire(ctx.bootstrap->peers()[peer].listen);
    GYRE_CHECK(connectToPeer(addr, ctx.bootstrap->link(), ctx.rank, tagOf(ctx.channel), ctx.deadline, ctx.abort,
                             &s->socket, s->what.c_str()));
    P2PHello hello{};
    memcpy(hello.magic, kHelloMagic, sizeof(hello.magic));
    hello.slotBytes = ctx.slotBytes;
    hello.pid = getpid();
    hello.cudaDev = ctx.bootstrap->peers()[ctx.rank].cudaDev;
    return s->socket.sendAll(&hello, sizeof(hello), ctx.deadline, ctx.abort, s->what.c_str());
  }

  ncclResult_t connectRecv(const ConnectContext& ctx, int peer, Connection* out) override {
    auto* s = start(ctx, peer, false, out);
    GYRE_CHECK(ctx.bootstrap->acceptor().acceptFrom(peer, tagOf(ctx.channel), ctx.deadline, ctx.abort, &s->socket));
    P2PHello hello{};
    GYRE_CHECK(s->socket.recvAll(&hello, sizeof(hello), ctx.deadline, ctx.abort, s->what.c_str()));
    P2PReply reply{};
    reply.pid = getpid();
    ncclResult_t r = ncclSuccess;
    if (memcmp(hello.magic, kHelloMagic, sizeof(kHelloMagic)) != 0)
      r = fail(ncclInternalError, "%s: the peer did not introduce itself as a p2p sender", s->what.c_str());
    else if (hello.slotBytes != ctx.slotBytes)
      r = fail(ncclInvalidUsage, "%s: rank %d uses %llu-byte steps, this rank %zu (NCCL_BUFFSIZE differs)",
               s->what.c_str(), peer, static_cast<unsigned long long>(hello.slotBytes), ctx.slotBytes);
    if (r == ncclSuccess) r = allocateFifo(ctx.slotBytes, s, &reply);
    reply.status = r == ncclSuccess ? 0 : 1;
    // The sender hears of a failure too, instead of timing out on the reply.
    ncclResult_t sent = s->socket.sendAll(&reply, sizeof(reply), ctx.deadline, ctx.abort, s->what.c_str());
    GYRE_CHECK(r);
    GYRE_CHECK(sent);
    pointFifoAt(static_cast<char*>(s->owned), ctx.slotBytes, out);
    return ncclSuccess;
  }

  ncclResult_t finishConnect(Connection& conn) override {
    auto* s = static_cast<P2PConn*>(conn.state);
    if (!conn.isSend || s->ready) return ncclSuccess;
    P2PReply reply{};
    GYRE_CHECK(s->socket.recvAll(&reply, sizeof(reply), s->deadline, s->abort, s->what.c_str()));
    if (reply.status != 0)
      return fail(ncclRemoteError, "%s: rank %d could not set up its side (see its error)", s->what.c_str(),
                  conn.peer);
    void* base = nullptr;
    if (reply.pid == getpid()) {
      base = reinterpret_cast<void*>(static_cast<uintptr_t>(reply.pointer));
    } else {
      // Through the registry: FIFOs of one peer may share a CUDA block.
      GYRE_CHECK(mapPeerAllocation(reply.pid, reply.shared, &s->heldBlocks, &base));
      base = static_cast<char*>(base) + reply.offset;
    }
    pointFifoAt(static_cast<char*>(base), s->slotBytes, &conn);
    s->ready = true;
    return ncclSuccess;
  }

  // Nothing moves on the host; the socket tells that the peer process went
  // away (EOF) or gave up (an abort notice: the rank it blames).
  ncclResult_t progress(Connection& conn, int* culprit) override {
    auto* s = static_cast<P2PConn*>(conn.state);
    if (peerClosedOf(conn) || s->socket.fd() < 0) return ncclSuccess;
    int32_t notice = -1;
    // Encrypted (GYRE_ENCRYPT=on), the notice is one record, handed up whole or not at all.
    const iovec v{&notice, sizeof(notice)};
    ssize_t n = s->socket.encrypted() ? s->socket.recvv(&v, 1)
                                      : recv(s->socket.fd(), &notice, sizeof(notice), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) markPeerClosed(conn);
    if (n != static_cast<ssize_t>(sizeof(notice))) return ncclSuccess;
    if (!s->socket.encrypted()) (void)::recv(s->socket.fd(), &notice, sizeof(notice), MSG_DONTWAIT);
    // A negative word is no rank either: widened as is, it names none.
    const uint64_t named = static_cast<uint64_t>(static_cast<int64_t>(notice));
    return failFromAbortNotice(named, s->rank, conn.peer, s->nranks, culprit);
  }
  bool pollRequest(const Connection&, pollfd*) const override { return false; }
  // Best effort: the peer's watchdog reads it (progress above).
  void sendAbortNotice(Connection& conn, int culprit) override {
    auto* s = static_cast<P2PConn*>(conn.state);
    if (!s || s->socket.fd() < 0) return;
    int32_t notice = culprit;
    const iovec v{&notice, sizeof(notice)};
    (void)s->socket.sendv(&v, 1);
  }

  void close(Connection& conn) override {
    auto* s = static_cast<P2PConn*>(conn.state);
    DeviceRuntime* rt = deviceRuntime();
    releasePeerBlocks(&s->heldBlocks);
    if (rt) freeAfterDeviceWork(DeferredFree::kDevice, s->owned);
    s->socket.close();
    delete s;
    conn.state = nullptr;
    conn.fifo = Fifo();
  }

 private:
  static P2PConn* start(const ConnectContext& ctx, int peer, bool isSend, Connection* out) {
    auto* s = new P2PConn();
    s->what = std::string("p2p ") + (isSend ? "to" : "from") + " rank " + std::to_string(peer) + " (device " +
              std::to_string(ctx.bootstrap->peers()[peer].cudaDev) + ")";
    s->deadline = ctx.deadline;
    s->abort = ctx.abort;
    s->slotBytes = ctx.slotBytes;
    s->rank = ctx.rank;
    s->nranks = ctx.bootstrap->nranks();
    out->state = s;
    out->needsProgress = false;
    out->sharedCounters = false;
    return s;
  }

  static ncclResult_t allocateFifo(size_t slotBytes, P2PConn* s, P2PReply* reply) {
    DeviceRuntime* rt = deviceRuntime();
    if (!rt) return fail(ncclInternalError, "%s: no CUDA runtime", s->what.c_str());
    FifoLayout l(slotBytes);
    RelaxedCapture relaxed;  // connections may be made by a captured call's group
    GYRE_CHECK(rt->deviceAlloc(l.total, &s->owned));
    // Counters, metadata and LL slots start at zero (no LL flag is 0);
    // Simple slots are always written before they are read.
    GYRE_CHECK(rt->memsetSync(static_cast<char*>(s->owned) + l.metaOffset, 0, l.total - l.metaOffset));
    reply->pointer = reinterpret_cast<uintptr_t>(s->owned);
    if (!describeOwnAllocation(s->owned, l.total, &reply->shared, &reply->offset))
      return fail(ncclUnhandledCudaError, "%s: cannot share the FIFO by CUDA IPC: %s", s->what.c_str(),
                  lastErrorText());
    return ncclSuccess;
  }
};

}  // namespace

Transport* p2pTransport() {
  static P2PTransport transport;
  return &transport;
}

}  // namespace gyre
