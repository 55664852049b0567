#include "src/host/progress.h"


namespace gyre {

void ProgressEngine::add(Connection* conn) {
  if (conn->needsProgress) conns_.push_back(conn);
}

void ProgressEngine::clear() {
  conns_.clear();
}

ncclResult_t ProgressEngine::progressAll(int* culprit) {
  for (Connection* c : conns_) {
    ncclResult_t r = c->transport->progress(*c, culprit);
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

void ProgressEngine::appendPollFds(std::vector<pollfd>* fds) const {
  for (Connection* c : conns_) {
    pollfd p{};
    if (c->transport->pollRequest(*c, &p)) fds->push_back(p);
  }
}

void ProgressEngine::sendAbortNotices(int culprit) {
  for (Connection* c : conns_)
    if (c->isSend) c->transport->sendAbortNotice(*c, culprit);
}

}  // namespace gyre
