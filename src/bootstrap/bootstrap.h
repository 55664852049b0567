// A communicator's control plane: the peer table from the rendezvous, the
// rank's acceptor, and a ring of sockets for small all-gathers and barriers
// used while setting up transports.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "src/bootstrap/acceptor.h"
#include "src/bootstrap/unique_id.h"
#include "src/bootstrap/wire.h"

namespace gyre {

class Bootstrap {
 public:
  // Runs the rendezvous (at ids[0], or with several ids at the root of this
  // rank's block) and connects the bootstrap ring. `self` is filled in with
  // this rank's listen address before it is sent.
  static ncclResult_t create(const std::vector<UniqueIdContents>& ids, int rank, int nranks, PeerInfo self,
                             const Deadline& connectDeadline, const Deadline& deadline,
                             const std::atomic<bool>* abort, std::unique_ptr<Bootstrap>* out);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // The session secret from the rendezvous (not the unique id's): what every
  // rank-to-rank connection and shared-memory handshake of this communicator proves.
  uint64_t secret() const { return link_.secret; }
  // The same, with what encrypted connections need to know of it.
  const LinkSecret& link() const { return link_; }
  const std::vector<PeerInfo>& peers() const { return peers_; }
  Acceptor& acceptor() { return acceptor_; }

  // Every rank contributes `bytesPerRank` at data + rank*bytesPerRank and gets
  // all contributions. Meant for setup-sized data (kilobytes).
  ncclResult_t allGather(void* data, size_t bytesPerRank, const Deadline& deadline,
                         const std::atomic<bool>* abort);
  ncclResult_t barrier(const Deadline& deadline, const std::atomic<bool>* abort);

  void close();

 private:
  int rank_ = 0;
  int nranks_ = 0;
  LinkSecret link_;
  std::vector<PeerInfo> peers_;
  Acceptor acceptor_;
  Socket ringNext_;
  Socket ringPrev_;
};

}  // namespace gyre
