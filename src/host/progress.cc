#include "src/host/progress.h"

#include <thread>

namespace gyre {

void ProgressEngine::add(Connection* conn) {
  if (conn->needsProgress) conns_.push_back(conn);
}

void ProgressEngine::clear() {
  conns_.clear();
  fds_.clear();
}

ncclResult_t ProgressEngine::progressAll(int* culprit) {
  for (Connection* c : conns_) {
    ncclResult_t r = c->transport->progress(*c, culprit);
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

void ProgressEngine::block(int timeoutMs) {
  fds_.clear();
  for (Connection* c : conns_) {
    pollfd p{};
    if (c->transport->pollRequest(*c, &p)) fds_.push_back(p);
  }
  if (fds_.empty()) {
    // Only memory-mapped connections: nothing to poll, give the core away.
    std::this_thread::yield();
    return;
  }
  poll(fds_.data(), fds_.size(), timeoutMs);
}

void ProgressEngine::sendAbortNotices(int culprit) {
  for (Connection* c : conns_)
    if (c->isSend) c->transport->sendAbortNotice(*c, culprit);
}

}  // namespace gyre
