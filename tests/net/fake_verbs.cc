// libgyre_fakeverbs.so: the part of the libibverbs API gyre uses, emulated
// between processes on one machine, so the IB network runs in CI without
// RDMA hardware (loaded through GYRE_IBVERBS_LIB).
//
// Two devices with two ports each: fake_ib0 (InfiniBand link layer) and
// fake_roce0 (Ethernet; GID 0 RoCE v1, 1 RoCE v2 link-local, 2 RoCE v2
// ::ffff:127.0.0.1, 3 RoCE v1). An RC QP listens on an abstract unix socket
// named after its QP number; moving it to RTR connects to the peer QP's
// socket. An RDMA write travels as [header][bytes] on that stream; the peer
// QP's thread checks the rkey, copies into the registered memory, consumes a
// posted receive for WRITE_WITH_IMM and answers with a status that becomes
// the sender's completion. ibv_post_send/ibv_post_recv/ibv_poll_cq are
// reached through the context's ops table, as verbs.h's inline calls do.
//
// Faults, from the environment of the process:
//   FAKEVERBS_QP_ERROR_AFTER=N    the Nth RDMA write with immediate (a piece
//                                 of a message) fails: its completion has
//                                 status "transport retry counter exceeded",
//                                 the QP enters the error state, and the peer
//                                 sees the link drop (its receives flush)
//   FAKEVERBS_PORT_DOWN=dev:port  that port reports state DOWN
//   FAKEVERBS_PORT_DOWN_AFTER=N   from the Nth RDMA write with immediate on,
//                                 the ports go down while running: every QP
//                                 that writes fails as above, ports report DOWN
//   FAKEVERBS_REG_MR_ENOMEM=1     ibv_reg_mr fails with ENOMEM
//   FAKEVERBS_DELAY_US=N          each completion is delayed N µs (slow network)
//   FAKEVERBS_ASYNC_EVENT=PORT_ERR|QP_FATAL with FAKEVERBS_ASYNC_AFTER=N
//                                 at the Nth RDMA write with immediate, the
//                                 device raises that asynchronous event (on
//                                 the writing QP's port, or the QP) and the
//                                 link goes dark: later writes there vanish
//                                 and never complete, so only the event can
//                                 end a wait before the timeout
// Posted sends are checked against live memory regions (lkey and range),
// failing with a local protection error as a NIC would. ibv_reg_dmabuf_mr
// maps the descriptor and serves the region's iova range from it.
// Counters for the tests: fakeverbs_counts(), fakeverbs_open_contexts(), fakeverbs_last_qp_attr(),
// fakeverbs_last_send_lkey().
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

// verbs.h turns these names into inline wrappers; the library exports them
// as plain functions, and so does the fake.
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace {

struct FakeCq {
  ibv_cq cq;
  std::mutex mu;
  std::deque<ibv_wc> wcs;
  void push(const ibv_wc& wc) {
    std::lock_guard<std::mutex> l(mu);
    wcs.push_back(wc);
  }
};

struct Mr {
  uintptr_t addr;  // the address work requests use (a dma-buf region's iova)
  size_t len;
  char* host = nullptr;  // dma-buf: where the fake mapped the descriptor's memory
  size_t mapLen = 0;
  char* at(uint64_t a) const { return host ? host + (a - addr) : reinterpret_cast<char*>(a); }
};

std::mutex gMrMu;
std::map<uint32_t, Mr> gMrs;  // rkey (= lkey) -> region
uint32_t gNextKey = 0x100;
std::atomic<long> gLiveMrs{0}, gLiveQps{0}, gLiveCqs{0}, gLivePds{0}, gOpenCtx{0}, gPostSends{0}, gRegCalls{0};
std::atomic<int> gLastTimeout{-1}, gLastRetry{-1}, gLastSl{-1}, gLastTc{-1}, gLastGidIndex{-1}, gLastIsGlobal{-1};
std::atomic<uint32_t> gQpCounter{0};
std::atomic<bool> gPortDown{false};  // FAKEVERBS_PORT_DOWN_AFTER struck
std::atomic<uint32_t> gLastSendLkey{0};
std::atomic<long> gAsyncEvents{0}, gAsyncAcks{0};
std::atomic<long> gDmabufMrs{0};  // live regions from ibv_reg_dmabuf_mr  // taken by ibv_get_async_event, acknowledged  // of the last data write's first piece (tests)

// Whether `lkey` names a live region covering [addr, addr + len), as a NIC
// checks a local buffer against its memory region.
// *src: where the fake reads those bytes.
bool localKeyCovers(uint32_t lkey, uint64_t addr, uint32_t len, const char** src) {
  std::lock_guard<std::mutex> l(gMrMu);
  auto it = gMrs.find(lkey);
  if (it == gMrs.end() || addr < it->second.addr || addr + len > it->second.addr + it->second.len) return false;
  *src = it->second.at(addr);
  return true;
}

long envLong(const char* name) {
  const char* v = getenv(name);
  return v ? atol(v) : 0;
}

struct WireHeader {
  uint32_t op;  // 1: RDMA write, 2: RDMA write with immediate
  uint32_t imm;
  uint64_t raddr;
  uint32_t rkey;
  uint32_t len;
};

struct Outstanding {
  uint64_t wrId;
  bool signaled;
};

struct FakeQp {
  ibv_qp qp;
  FakeCq* sendCq;
  FakeCq* recvCq;
  int listenFd = -1, outFd = -1, inFd = -1, wakeFd = -1;
  std::mutex mu;       // guards the queues and the state
  std::mutex writeMu;  // one request at a time on outFd
  std::deque<uint64_t> recvs;
  std::deque<Outstanding> outstanding;
  std::atomic<bool> error{false};  // set under mu; the QP thread reads it without taking mu
  int port = 1;                      // from the INIT transition
  std::atomic<bool> stalled{false};  // FAKEVERBS_ASYNC_EVENT struck: writes vanish, nothing completes
  std::atomic<bool> stop{false};
  std::thread thread;

  // Enters the error state: flushes posted receives and unanswered sends.
  void fail(int firstStatus) {
    std::lock_guard<std::mutex> l(mu);
    failLocked(firstStatus);
  }
  void failLocked(int firstStatus) {
    if (error) return;
    error = true;
    qp.state = IBV_QPS_ERR;
    for (const Outstanding& o : outstanding) {
      ibv_wc wc{};
      wc.wr_id = o.wrId;
      wc.status = static_cast<ibv_wc_status>(firstStatus);
      wc.opcode = IBV_WC_RDMA_WRITE;
      wc.qp_num = qp.qp_num;
      sendCq->push(wc);
      firstStatus = IBV_WC_WR_FLUSH_ERR;
    }
    outstanding.clear();
    for (uint64_t id : recvs) {
      ibv_wc wc{};
      wc.wr_id = id;
      wc.status = IBV_WC_WR_FLUSH_ERR;
      wc.opcode = IBV_WC_RECV;
      wc.qp_num = qp.qp_num;
      recvCq->push(wc);
    }
    recvs.clear();
    if (outFd >= 0) shutdown(outFd, SHUT_RDWR);
    if (inFd >= 0) shutdown(inFd, SHUT_RDWR);
  }
};

bool readFull(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool writeFull(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = send(fd, c, n, MSG_NOSIGNAL);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

sockaddr_un addressOf(uint32_t qpn, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  int n = snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "gyre-fakeverbs-%u", qpn);
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

// One incoming RDMA write: into registered memory, then the answer.
bool serveWrite(FakeQp* q) {
  WireHeader h{};
  if (!readFull(q->inFd, &h, sizeof(h))) return false;
  std::vector<char> data(h.len);
  if (h.len && !readFull(q->inFd, data.data(), h.len)) return false;
  if (long d = envLong("FAKEVERBS_DELAY_US")) usleep(static_cast<useconds_t>(d));
  int status = IBV_WC_SUCCESS;
  {
    std::lock_guard<std::mutex> l(gMrMu);
    auto it = gMrs.find(h.rkey);
    if (it == gMrs.end() || h.raddr < it->second.addr || h.raddr + h.len > it->second.addr + it->second.len) {
      status = IBV_WC_REM_ACCESS_ERR;
    } else if (h.len) {
      // The last 8 bytes last, with a release store when they are one
      // aligned word: a poller of a flag at the end of the written region
      // (a FIFO entry's sequence, loaded with acquire) sees the rest first,
      // and ThreadSanitizer, which ignores fences, sees the ordering too.
      char* dst = it->second.at(h.raddr);
      size_t head = h.len >= 8 ? h.len - 8 : 0;
      memcpy(dst, data.data(), head);
      if (h.len >= 8 && reinterpret_cast<uintptr_t>(dst + head) % 8 == 0) {
        uint64_t last;
        memcpy(&last, data.data() + head, 8);
        __atomic_store_n(reinterpret_cast<uint64_t*>(dst + head), last, __ATOMIC_RELEASE);
      } else {
        __atomic_thread_fence(__ATOMIC_RELEASE);
        memcpy(dst + head, data.data() + head, h.len - head);
      }
    }
  }
  if (status == IBV_WC_SUCCESS && h.op == 2) {
    std::lock_guard<std::mutex> l(q->mu);
    if (q->recvs.empty()) {
      status = IBV_WC_RNR_RETRY_EXC_ERR;
    } else {
      ibv_wc wc{};
      wc.wr_id = q->recvs.front();
      q->recvs.pop_front();
      wc.status = IBV_WC_SUCCESS;
      wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
      wc.wc_flags = IBV_WC_WITH_IMM;
      wc.imm_data = h.imm;
      wc.byte_len = h.len;
      wc.qp_num = q->qp.qp_num;
      q->recvCq->push(wc);
    }
  }
  uint32_t answer = static_cast<uint32_t>(status);
  return writeFull(q->inFd, &answer, sizeof(answer));
}

bool takeAnswer(FakeQp* q) {
  uint32_t status = 0;
  if (!readFull(q->outFd, &status, sizeof(status))) return false;
  std::lock_guard<std::mutex> l(q->mu);
  if (q->outstanding.empty()) return true;
  Outstanding o = q->outstanding.front();
  q->outstanding.pop_front();
  if (status != IBV_WC_SUCCESS) {
    q->outstanding.push_front(o);
    q->failLocked(static_cast<int>(status));
    return true;
  }
  if (o.signaled) {
    ibv_wc wc{};
    wc.wr_id = o.wrId;
    wc.status = IBV_WC_SUCCESS;
    wc.opcode = IBV_WC_RDMA_WRITE;
    wc.qp_num = q->qp.qp_num;
    q->sendCq->push(wc);
  }
  return true;
}

void serve(FakeQp* q) {
  while (!q->stop.load()) {
    // outFd is set by ibv_modify_qp on the caller's thread: read under mu.
    pollfd p[4] = {{q->wakeFd, POLLIN, 0}, {q->listenFd, POLLIN, 0}, {q->inFd, POLLIN, 0}, {-1, POLLIN, 0}};
    {
      std::lock_guard<std::mutex> l(q->mu);
      p[3].fd = q->outFd;
    }
    if (poll(p, 4, 100) <= 0) continue;
    if (p[0].revents) {
      uint64_t v;
      (void)!read(q->wakeFd, &v, sizeof(v));
    }
    if (p[1].revents & POLLIN) {
      int fd = accept4(q->listenFd, nullptr, nullptr, SOCK_CLOEXEC);
      std::lock_guard<std::mutex> l(q->mu);
      if (fd >= 0) q->inFd = fd;
    }
    if (p[2].fd >= 0 && p[2].revents && !q->error && !serveWrite(q)) q->fail(IBV_WC_WR_FLUSH_ERR);
    if (p[3].fd >= 0 && p[3].revents && !q->error && !takeAnswer(q)) q->fail(IBV_WC_RETRY_EXC_ERR);
    if (q->error) usleep(1000);  // nothing more will arrive; wait for destroy
  }
}

// Asynchronous events of one context: a queue, and an eventfd (semaphore
// mode) that is readable while the queue holds events, as async_fd is.
struct AsyncQueue {
  std::mutex mu;
  std::deque<ibv_async_event> events;
  std::atomic<bool> portStalled[3] = {false, false, false};  // per port number
};

struct FakeContext {
  ibv_context ctx;
  struct FakeDevice* dev;
  AsyncQueue async;
};

void raiseAsync(ibv_context* ctx, const ibv_async_event& e) {
  auto* c = reinterpret_cast<FakeContext*>(ctx);
  {
    std::lock_guard<std::mutex> l(c->async.mu);
    c->async.events.push_back(e);
  }
  uint64_t one = 1;
  (void)!write(ctx->async_fd, &one, sizeof(one));
}

// FAKEVERBS_ASYNC_EVENT at the FAKEVERBS_ASYNC_AFTER-th data write: the
// link goes dark under `q` (its writes, or its port's, vanish without a
// completion, as on a dead link before the retry timeout) and the device
// reports the event.
void maybeRaiseAsync(FakeQp* q, long n) {
  const char* kind = getenv("FAKEVERBS_ASYNC_EVENT");
  const long at = envLong("FAKEVERBS_ASYNC_AFTER");
  if (!kind || n != at) return;
  ibv_async_event e{};
  if (std::string(kind) == "PORT_ERR") {
    const int port = q->port >= 1 && q->port <= 2 ? q->port : 1;
    reinterpret_cast<FakeContext*>(q->qp.context)->async.portStalled[port] = true;
    e.event_type = IBV_EVENT_PORT_ERR;
    e.element.port_num = q->port;
  } else if (std::string(kind) == "QP_FATAL") {
    q->stalled = true;
    e.event_type = IBV_EVENT_QP_FATAL;
    e.element.qp = &q->qp;
  } else {
    return;
  }
  raiseAsync(q->qp.context, e);
}

bool isStalled(FakeQp* q) {
  if (q->stalled) return true;
  auto* c = reinterpret_cast<FakeContext*>(q->qp.context);
  return q->port >= 1 && q->port <= 2 && c->async.portStalled[q->port];
}

int fakePostSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  for (; wr; wr = wr->next) {
    if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
      *bad = wr;
      return EINVAL;
    }
    // Only writes with an immediate (message data) count towards the fault,
    // so it strikes a connection that carries data, not an idle one.
    ++gPostSends;
    static std::atomic<long> dataWrites{0};
    const long n = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? ++dataWrites : 0;
    const long failAt = envLong("FAKEVERBS_QP_ERROR_AFTER");
    const long downAt = envLong("FAKEVERBS_PORT_DOWN_AFTER");
    const bool signaled = wr->send_flags & IBV_SEND_SIGNALED;
    const char* srcs[4] = {};
    if (n > 0) maybeRaiseAsync(q, n);
    if (isStalled(q)) {  // accepted, never sent, never completed
      std::lock_guard<std::mutex> l(q->mu);
      q->outstanding.push_back({wr->wr_id, signaled});
      continue;
    }
    int fd;
    {
      std::lock_guard<std::mutex> l(q->mu);
      q->outstanding.push_back({wr->wr_id, signaled});
      if (q->error) {  // completes at once, flushed
        ibv_wc wc{};
        wc.wr_id = wr->wr_id;
        wc.status = IBV_WC_WR_FLUSH_ERR;
        wc.opcode = IBV_WC_RDMA_WRITE;
        wc.qp_num = q->qp.qp_num;
        q->outstanding.pop_back();
        q->sendCq->push(wc);
        continue;
      }
      if (failAt > 0 && n == failAt) {
        q->failLocked(IBV_WC_RETRY_EXC_ERR);
        continue;
      }
      if (downAt > 0 && n >= downAt) {  // the port is gone: this write and every later one fail
        gPortDown = true;
        q->failLocked(IBV_WC_RETRY_EXC_ERR);
        continue;
      }
      bool keysOk = wr->num_sge <= 4;
      for (int i = 0; i < wr->num_sge && keysOk; ++i)
        keysOk = localKeyCovers(wr->sg_list[i].lkey, wr->sg_list[i].addr, wr->sg_list[i].length, &srcs[i]);
      if (!keysOk) {
        q->failLocked(IBV_WC_LOC_PROT_ERR);
        continue;
      }
      if (n > 0 && wr->num_sge > 0) gLastSendLkey = wr->sg_list[0].lkey;
      fd = q->outFd;
    }
    WireHeader h{};
    h.op = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? 2 : 1;
    h.imm = wr->imm_data;
    h.raddr = wr->wr.rdma.remote_addr;
    h.rkey = wr->wr.rdma.rkey;
    std::vector<char> data(sizeof(h));
    for (int i = 0; i < wr->num_sge; ++i) data.insert(data.end(), srcs[i], srcs[i] + wr->sg_list[i].length);
    h.len = static_cast<uint32_t>(data.size() - sizeof(h));
    memcpy(data.data(), &h, sizeof(h));
    // Not under `mu`: this QP's thread must keep serving the peer's writes
    // (which take `mu`) while this send waits for room in the socket.
    std::lock_guard<std::mutex> w(q->writeMu);
    if (fd < 0 || !writeFull(fd, data.data(), data.size())) q->fail(IBV_WC_RETRY_EXC_ERR);
  }
  return 0;
}

int fakePostRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr**) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  std::lock_guard<std::mutex> l(q->mu);
  for (; wr; wr = wr->next) {
    if (q->error) {
      ibv_wc wc{};
      wc.wr_id = wr->wr_id;
      wc.status = IBV_WC_WR_FLUSH_ERR;
      wc.opcode = IBV_WC_RECV;
      wc.qp_num = q->qp.qp_num;
      q->recvCq->push(wc);
    } else {
      q->recvs.push_back(wr->wr_id);
    }
  }
  return 0;
}

int fakePollCq(ibv_cq* cq, int n, ibv_wc* wc) {
  auto* c = reinterpret_cast<FakeCq*>(cq);
  std::lock_guard<std::mutex> l(c->mu);
  int k = 0;
  while (k < n && !c->wcs.empty()) {
    wc[k++] = c->wcs.front();
    c->wcs.pop_front();
  }
  return k;
}

struct FakeDevice {
  ibv_device dev;
  bool roce;
};

FakeDevice gDevices[2];
ibv_device* gList[3];

ibv_gid gidOf(const FakeDevice* d, int index) {
  ibv_gid g{};
  if (d->roce && index == 2) {
    g.raw[10] = g.raw[11] = 0xff;
    g.raw[12] = 127;
    g.raw[15] = 1;
  } else {
    g.raw[0] = 0xfe;
    g.raw[1] = 0x80;
    g.raw[15] = static_cast<uint8_t>(index + 1);
  }
  return g;
}

}  // namespace

EXPORT ibv_device** ibv_get_device_list(int* n) {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* names[2] = {"fake_ib0", "fake_roce0"};
    for (int i = 0; i < 2; ++i) {
      memset(&gDevices[i], 0, sizeof(gDevices[i]));
      snprintf(gDevices[i].dev.name, sizeof(gDevices[i].dev.name), "%s", names[i]);
      snprintf(gDevices[i].dev.dev_name, sizeof(gDevices[i].dev.dev_name), "uverbs%d", i);
      gDevices[i].roce = i == 1;
      gList[i] = &gDevices[i].dev;
    }
    gList[2] = nullptr;
  });
  if (n) *n = 2;
  return gList;
}

EXPORT void ibv_free_device_list(ibv_device**) {}
EXPORT const char* ibv_get_device_name(ibv_device* d) { return d->name; }

EXPORT ibv_context* ibv_open_device(ibv_device* d) {
  auto* c = new FakeContext();
  c->ctx.device = d;
  c->ctx.async_fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  c->ctx.ops.post_send = fakePostSend;
  c->ctx.ops.post_recv = fakePostRecv;
  c->ctx.ops.poll_cq = fakePollCq;
  c->dev = reinterpret_cast<FakeDevice*>(d);
  ++gOpenCtx;
  return &c->ctx;
}

EXPORT int ibv_close_device(ibv_context* ctx) {
  close(ctx->async_fd);
  delete reinterpret_cast<FakeContext*>(ctx);
  --gOpenCtx;
  return 0;
}

// One event from the queue; with nothing queued, EAGAIN (gyre makes the
// descriptor non-blocking and polls it first).
EXPORT int ibv_get_async_event(ibv_context* ctx, ibv_async_event* e) {
  auto* c = reinterpret_cast<FakeContext*>(ctx);
  std::lock_guard<std::mutex> l(c->async.mu);
  if (c->async.events.empty()) {
    errno = EAGAIN;
    return -1;
  }
  uint64_t v;
  (void)!read(ctx->async_fd, &v, sizeof(v));  // one count per event
  *e = c->async.events.front();
  c->async.events.pop_front();
  ++gAsyncEvents;
  return 0;
}

EXPORT void ibv_ack_async_event(ibv_async_event*) { ++gAsyncAcks; }

EXPORT int ibv_query_device(ibv_context*, ibv_device_attr* a) {
  memset(a, 0, sizeof(*a));
  a->phys_port_cnt = 2;
  a->max_qp_wr = 4096;
  return 0;
}

// Declared with the older, shorter struct; gyre passes a whole ibv_port_attr.
EXPORT int ibv_query_port(ibv_context* ctx, uint8_t port, _compat_ibv_port_attr* compat) {
  auto* a = reinterpret_cast<ibv_port_attr*>(compat);
  auto* d = reinterpret_cast<FakeContext*>(ctx)->dev;
  if (port < 1 || port > 2) return EINVAL;
  memset(a, 0, sizeof(*a));
  a->state = IBV_PORT_ACTIVE;
  const char* down = getenv("FAKEVERBS_PORT_DOWN");
  if (down && std::string(down) == std::string(d->dev.name) + ":" + std::to_string(port)) a->state = IBV_PORT_DOWN;
  if (gPortDown) a->state = IBV_PORT_DOWN;
  a->max_mtu = a->active_mtu = IBV_MTU_4096;
  a->gid_tbl_len = d->roce ? 4 : 1;
  a->lid = d->roce ? 0 : static_cast<uint16_t>(0x10 + port);
  a->link_layer = d->roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  a->active_speed = 32;  // 25 Gb/s a lane
  a->active_width = 2;   // 4 lanes
  return 0;
}

EXPORT int ibv_query_gid(ibv_context* ctx, uint8_t port, int index, ibv_gid* gid) {
  auto* d = reinterpret_cast<FakeContext*>(ctx)->dev;
  if (port < 1 || port > 2 || index < 0 || index >= (d->roce ? 4 : 1)) return EINVAL;
  *gid = gidOf(d, index);
  return 0;
}

EXPORT int _ibv_query_gid_ex(ibv_context* ctx, uint32_t port, uint32_t index, ibv_gid_entry* e, uint32_t,
                             size_t) {
  auto* d = reinterpret_cast<FakeContext*>(ctx)->dev;
  if (port < 1 || port > 2 || index >= (d->roce ? 4u : 1u)) return EINVAL;
  memset(e, 0, sizeof(*e));
  e->gid = gidOf(d, static_cast<int>(index));
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = !d->roce ? IBV_GID_TYPE_IB : (index == 1 || index == 2) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  return 0;
}

EXPORT ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  auto* pd = new ibv_pd();
  pd->context = ctx;
  ++gLivePds;
  return pd;
}

EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  delete pd;
  --gLivePds;
  return 0;
}

EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t len, int access) {
  ++gRegCalls;
  if (envLong("FAKEVERBS_REG_MR_ENOMEM")) {
    errno = ENOMEM;
    return nullptr;
  }
  auto* mr = new ibv_mr();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  (void)access;
  std::lock_guard<std::mutex> l(gMrMu);
  mr->lkey = mr->rkey = gNextKey++;
  gMrs[mr->rkey] = Mr{reinterpret_cast<uintptr_t>(addr), len};
  ++gLiveMrs;
  return mr;
}

// A dma-buf region: the fake maps the descriptor (a memfd in the tests
// stands in for GPU memory the CUDA driver exported) and serves the iova
// range from that mapping, as a NIC reaches the exporter's pages.
EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
  ++gRegCalls;
  (void)access;
  const uint64_t page = 4096, start = offset & ~(page - 1);
  const size_t mapLen = static_cast<size_t>(offset - start + len);
  void* m = mmap(nullptr, mapLen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(start));
  if (m == MAP_FAILED) return nullptr;  // errno from mmap
  auto* mr = new ibv_mr();
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = reinterpret_cast<void*>(iova);
  mr->length = len;
  std::lock_guard<std::mutex> l(gMrMu);
  mr->lkey = mr->rkey = gNextKey++;
  Mr r{iova, len};
  r.host = static_cast<char*>(m) + (offset - start);
  r.mapLen = mapLen;
  gMrs[mr->rkey] = r;
  ++gLiveMrs;
  ++gDmabufMrs;
  return mr;
}

EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t len, uint64_t, unsigned access) {
  return ibv_reg_mr(pd, addr, len, static_cast<int>(access));
}

EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  {
    std::lock_guard<std::mutex> l(gMrMu);
    auto it = gMrs.find(mr->rkey);
    if (it != gMrs.end() && it->second.host) {
      const uintptr_t base = reinterpret_cast<uintptr_t>(it->second.host) & ~uintptr_t{4095};
      munmap(reinterpret_cast<void*>(base), it->second.mapLen);
      --gDmabufMrs;
    }
    if (it != gMrs.end()) gMrs.erase(it);
  }
  delete mr;
  --gLiveMrs;
  return 0;
}

EXPORT ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* user, ibv_comp_channel* ch, int) {
  auto* c = new FakeCq();
  c->cq.context = ctx;
  c->cq.cqe = cqe;
  c->cq.cq_context = user;
  c->cq.channel = ch;
  ++gLiveCqs;
  return &c->cq;
}

EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  delete reinterpret_cast<FakeCq*>(cq);
  --gLiveCqs;
  return 0;
}

EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (attr->qp_type != IBV_QPT_RC) {
    errno = EINVAL;
    return nullptr;
  }
  auto* q = new FakeQp();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  // Unique on the machine while alive: 20 bits of pid, 4096 QPs per process.
  q->qp.qp_num = ((static_cast<uint32_t>(getpid()) & 0xfffff) << 12) | (gQpCounter++ & 0xfff);
  q->sendCq = reinterpret_cast<FakeCq*>(attr->send_cq);
  q->recvCq = reinterpret_cast<FakeCq*>(attr->recv_cq);
  q->listenFd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len;
  sockaddr_un a = addressOf(q->qp.qp_num, &len);
  if (q->listenFd < 0 || bind(q->listenFd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(q->listenFd, 4) != 0) {
    int e = errno;
    if (q->listenFd >= 0) close(q->listenFd);
    delete q;
    errno = e;
    return nullptr;
  }
  q->wakeFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  q->thread = std::thread(serve, q);
  ++gLiveQps;
  return &q->qp;
}

EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  if (attr->qp_state == IBV_QPS_RTR) {
    if (mask & IBV_QP_AV) {
      gLastSl = attr->ah_attr.sl;
      gLastIsGlobal = attr->ah_attr.is_global;
      if (attr->ah_attr.is_global) {
        gLastTc = attr->ah_attr.grh.traffic_class;
        gLastGidIndex = attr->ah_attr.grh.sgid_index;
      }
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t len;
    sockaddr_un a = addressOf(attr->dest_qp_num, &len);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
      int e = errno;
      if (fd >= 0) close(fd);
      return e ? e : EINVAL;
    }
    {
      std::lock_guard<std::mutex> l(q->mu);
      q->outFd = fd;
    }
    uint64_t one = 1;
    (void)!write(q->wakeFd, &one, sizeof(one));
  } else if (attr->qp_state == IBV_QPS_INIT) {
    if (mask & IBV_QP_PORT) q->port = attr->port_num;
  } else if (attr->qp_state == IBV_QPS_RTS) {
    if (mask & IBV_QP_TIMEOUT) gLastTimeout = attr->timeout;
    if (mask & IBV_QP_RETRY_CNT) gLastRetry = attr->retry_cnt;
  } else if (attr->qp_state == IBV_QPS_ERR) {
    q->fail(IBV_WC_WR_FLUSH_ERR);
  }
  qp->state = attr->qp_state;
  return 0;
}

EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  auto* q = reinterpret_cast<FakeQp*>(qp);
  q->stop = true;
  {
    std::lock_guard<std::mutex> l(q->mu);  // a read blocked mid-message returns
    if (q->outFd >= 0) shutdown(q->outFd, SHUT_RDWR);
    if (q->inFd >= 0) shutdown(q->inFd, SHUT_RDWR);
  }
  uint64_t one = 1;
  (void)!write(q->wakeFd, &one, sizeof(one));
  q->thread.join();
  for (int fd : {q->listenFd, q->outFd, q->inFd, q->wakeFd})
    if (fd >= 0) close(fd);
  delete q;
  --gLiveQps;
  return 0;
}

// For the tests: objects alive now and calls made so far.
// Device contexts open now; each holds one descriptor (its async_fd).
EXPORT long fakeverbs_open_contexts() { return gOpenCtx; }

EXPORT void fakeverbs_counts(long* mrs, long* qps, long* cqs, long* pds, long* regCalls, long* postSends) {
  *mrs = gLiveMrs;
  *qps = gLiveQps;
  *cqs = gLiveCqs;
  *pds = gLivePds;
  *regCalls = gRegCalls;
  *postSends = gPostSends;
}

// Live dma-buf regions.
EXPORT long fakeverbs_dmabuf_mrs() { return gDmabufMrs; }

// Asynchronous events taken and acknowledged so far.
EXPORT void fakeverbs_async_counts(long* taken, long* acked) {
  *taken = gAsyncEvents;
  *acked = gAsyncAcks;
}

// The local key of the last data write posted (0: none yet).
EXPORT uint32_t fakeverbs_last_send_lkey() { return gLastSendLkey; }

// The attributes of the last QP moved to RTR/RTS (-1: never set).
EXPORT void fakeverbs_last_qp_attr(int* timeout, int* retry, int* sl, int* tc, int* gidIndex, int* isGlobal) {
  *timeout = gLastTimeout;
  *retry = gLastRetry;
  *sl = gLastSl;
  *tc = gLastTc;
  *gidIndex = gLastGidIndex;
  *isGlobal = gLastIsGlobal;
}
