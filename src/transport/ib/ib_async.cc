#include "src/transport/ib/ib_async.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "src/debug/fork_guard.h"
#include "src/debug/log.h"
#include "src/transport/ib/verbs_api.h"

namespace gyre::ib {
namespace {

constexpr int kPollMs = 1000;  // the thread also wakes for its stop descriptor

struct DeviceWatch {
  ibv_context* ctx = nullptr;
  std::string device;
  std::vector<IbComm*> comms;
  int stopFd = -1;
  std::thread* thread = nullptr;  // never destroyed at exit (a joinable std::thread would terminate)
};

std::mutex gMu;
std::vector<DeviceWatch*> gWatches;

// Marks `c` failed with `text` (the first event wins). [gMu]
void markFailed(IbComm* c, const std::string& text) {
  if (c->asyncFailed.load(std::memory_order_relaxed)) return;
  c->asyncError = text;
  c->asyncFailed.store(true, std::memory_order_release);
}

bool ownsQp(const IbComm* c, const ibv_qp* qp) {
  for (const ibv_qp* q : c->qps)
    if (q == qp) return true;
  return false;
}

// Applies one event to the connections it hits. [gMu]
void apply(DeviceWatch* w, const ibv_async_event& e) {
  const std::string event = asyncEventText(e.event_type);
  switch (e.event_type) {
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_DEVICE_FATAL: {
      const bool wholeDevice = e.event_type == IBV_EVENT_DEVICE_FATAL;
      const std::string where = wholeDevice ? w->device : w->device + " port " + std::to_string(e.element.port_num);
      GYRE_WARN("NET/IB: asynchronous event %s on %s", event.c_str(), where.c_str());
      for (IbComm* c : w->comms)
        if (wholeDevice || c->port->port == e.element.port_num)
          markFailed(c, "NET/IB " + c->what + ": asynchronous event " + event + " on " + where);
      return;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      for (IbComm* c : w->comms)
        if (ownsQp(c, e.element.qp))
          markFailed(c, "NET/IB " + c->what + ": asynchronous event " + event + " on " + w->device + " port " +
                            std::to_string(c->port->port) + ", QP " + std::to_string(e.element.qp->qp_num));
      return;
    case IBV_EVENT_CQ_ERR:
      for (IbComm* c : w->comms)
        if (c->cq == e.element.cq)
          markFailed(c, "NET/IB " + c->what + ": asynchronous event " + event + " on " + w->device + " port " +
                            std::to_string(c->port->port) + " (completion queue overrun)");
      return;
    default:
      GYRE_INFO("NET", "NET/IB: asynchronous event %s on %s", event.c_str(), w->device.c_str());
  }
}

void readEvents(DeviceWatch* w) {
  const VerbsApi* v = verbs(nullptr);
  const int fd = w->ctx->async_fd;
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {w->stopFd, POLLIN, 0}};
    const int n = poll(p, 2, kPollMs);
    if (n < 0 && errno != EINTR) {
      GYRE_WARN("NET/IB: %s: poll on the asynchronous event descriptor failed: %s", w->device.c_str(),
                strerror(errno));
      return;
    }
    if (p[1].revents) return;
    if (n <= 0 || !p[0].revents) continue;
    if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {  // the device is gone: nothing more will come
      GYRE_WARN("NET/IB: %s: the asynchronous event descriptor failed (revents 0x%x); events are no longer read",
                w->device.c_str(), static_cast<unsigned>(p[0].revents));
      return;
    }
    ibv_async_event e{};
    if (v->getAsyncEvent(w->ctx, &e) != 0) continue;  // non-blocking: nothing after all
    {
      std::lock_guard<std::mutex> lock(gMu);
      apply(w, e);
    }
    v->ackAsyncEvent(&e);
  }
}

}  // namespace

void asyncAttach(IbComm* c) {
  const VerbsApi* v = verbs(nullptr);
  if (!v || !v->getAsyncEvent || !v->ackAsyncEvent || !c->port || !c->port->ctx) return;
  std::lock_guard<std::mutex> lock(gMu);
  DeviceWatch* w = nullptr;
  for (DeviceWatch* x : gWatches)
    if (x->ctx == c->port->ctx) w = x;
  if (!w) {
    const int stopFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    const int fd = c->port->ctx->async_fd;
    // Non-blocking, so a read that finds nothing (another reader, a
    // spurious wake-up) never holds the thread past a stop request.
    if (stopFd < 0 || fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
      GYRE_INFO("NET", "NET/IB: %s: no asynchronous event thread (%s); a dead port shows as completion errors",
                c->port->device.c_str(), fd < 0 ? "the context has no event descriptor" : strerror(errno));
      if (stopFd >= 0) close(stopFd);
      return;
    }
    w = new DeviceWatch();
    w->ctx = c->port->ctx;
    w->device = c->port->device;
    w->stopFd = stopFd;
    w->thread = new std::thread([hazard = ForkHazard(), w] { readEvents(w); });
    gWatches.push_back(w);
  }
  w->comms.push_back(c);
}

void asyncDetach(IbComm* c) {
  DeviceWatch* stop = nullptr;
  {
    std::lock_guard<std::mutex> lock(gMu);
    for (size_t i = 0; i < gWatches.size(); ++i) {
      DeviceWatch* w = gWatches[i];
      for (size_t k = 0; k < w->comms.size(); ++k)
        if (w->comms[k] == c) {
          w->comms.erase(w->comms.begin() + static_cast<long>(k));
          break;
        }
      if (w->comms.empty()) {
        stop = w;
        gWatches.erase(gWatches.begin() + static_cast<long>(i));
        break;
      }
    }
  }
  if (!stop) return;
  // Joined outside the lock: the thread takes it to apply an event.
  const uint64_t one = 1;
  (void)!write(stop->stopFd, &one, sizeof(one));
  stop->thread->join();
  delete stop->thread;
  close(stop->stopFd);
  delete stop;
}

std::string asyncFailure(const IbComm* c) {
  if (!c->asyncFailed.load(std::memory_order_acquire)) return "";
  return c->asyncError;  // written once, before the flag
}

int asyncThreadCount() {
  std::lock_guard<std::mutex> lock(gMu);
  return static_cast<int>(gWatches.size());
}

}  // namespace gyre::ib
