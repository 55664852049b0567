#include "src/bootstrap/bootstrap.h"

#include <cstring>

#include "src/bootstrap/interfaces.h"
#include "src/bootstrap/rendezvous.h"
#include "src/debug/error.h"
#include "src/debug/log.h"

namespace gyre {

ncclResult_t Bootstrap::create(const std::vector<UniqueIdContents>& ids, int rank, int nranks, PeerInfo self,
                               const Deadline& connectDeadline, const Deadline& deadline,
                               const std::atomic<bool>* abort, std::unique_ptr<Bootstrap>* out) {
  GYRE_CHECK(checkProtectionPossible(LinkSecret{ids[0].secret, !ids[0].fixedAddress, LinkPurpose::Rendezvous},
                                     "init"));
  auto b = std::make_unique<Bootstrap>();
  b->rank_ = rank;
  b->nranks_ = nranks;
  // Listen on the interface that reaches the root: with NCCL_COMM_ID on
  // loopback the ranks stay on loopback; otherwise NCCL_SOCKET_IFNAME decides.
  Interface itf;
  GYRE_CHECK(selectInterface(&itf));
  GYRE_CHECK(b->acceptor_.listen(itf.address));
  self.listen = b->acceptor_.address().toWire();
  GYRE_CHECK(joinRendezvous(ids, rank, nranks, self, connectDeadline, deadline, abort, &b->peers_, &b->link_));
  b->acceptor_.setLink(b->link_);
  b->acceptor_.setPeers(&b->peers_, rank);
  if (nranks > 1) {
    int next = (rank + 1) % nranks;
    int prev = (rank + nranks - 1) % nranks;
    char what[64];
    snprintf(what, sizeof(what), "init: connecting the bootstrap ring to rank %d", next);
    GYRE_CHECK(connectToPeer(NetAddress::fromWire(b->peers_[next].listen), b->link_, rank, kTagBootstrapRing,
                             deadline, abort, &b->ringNext_, what));
    GYRE_CHECK(b->acceptor_.acceptFrom(prev, kTagBootstrapRing, deadline, abort, &b->ringPrev_));
  }
  GYRE_INFO("INIT", "bootstrap done: rank %d of %d listening on %s", rank, nranks,
            b->acceptor_.address().toString().c_str());
  *out = std::move(b);
  return ncclSuccess;
}

ncclResult_t Bootstrap::allGather(void* data, size_t bytesPerRank, const Deadline& deadline,
                                  const std::atomic<bool>* abort) {
  auto* bytes = static_cast<char*>(data);
  for (int step = 0; step < nranks_ - 1; ++step) {
    int sendSlice = (rank_ - step + nranks_) % nranks_;
    int recvSlice = (rank_ - step - 1 + nranks_) % nranks_;
    int prev = (rank_ + nranks_ - 1) % nranks_;
    char what[96];
    snprintf(what, sizeof(what), "bootstrap all-gather: sending to rank %d", (rank_ + 1) % nranks_);
    GYRE_CHECK(ringNext_.sendAll(bytes + sendSlice * bytesPerRank, bytesPerRank, deadline, abort, what));
    snprintf(what, sizeof(what), "bootstrap all-gather: receiving from rank %d", prev);
    GYRE_CHECK(ringPrev_.recvAll(bytes + recvSlice * bytesPerRank, bytesPerRank, deadline, abort, what));
  }
  return ncclSuccess;
}

ncclResult_t Bootstrap::barrier(const Deadline& deadline, const std::atomic<bool>* abort) {
  std::vector<char> tokens(nranks_);
  return allGather(tokens.data(), 1, deadline, abort);
}

void Bootstrap::close() {
  ringNext_.close();
  ringPrev_.close();
  acceptor_.close();
}

}  // namespace gyre
